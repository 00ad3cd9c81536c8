import { type Inventory, InventoryError } from './inventory.ts';
import type { ApiError, ApiResponse, Item } from './types.ts';

/** `GET /items`: every item, sorted by SKU. */
export function listItems(inventory: Inventory): ApiResponse<Item[]> {
  return { status: 200, body: inventory.list() };
}

/** `GET /items/:sku`: the item, or 404. */
export function getItem(inventory: Inventory, sku: string): ApiResponse<Item> {
  const item = inventory.get(sku);
  return item ? { status: 200, body: item } : { status: 404, body: { code: 'unknown_sku', message: `no item with SKU ${sku}` } };
}

/** `POST /items/:sku/deliveries` with `{ quantity }`: adds stock; answers the updated item. */
export function postDelivery(inventory: Inventory, sku: string, body: unknown): ApiResponse<Item> {
  return answer(inventory, sku, () => inventory.receive(sku, quantityOf(body)));
}

/** `POST /items/:sku/shipments` with `{ quantity }`: removes stock, or 409 when there is not enough. */
export function postShipment(inventory: Inventory, sku: string, body: unknown): ApiResponse<Item> {
  return answer(inventory, sku, () => inventory.ship(sku, quantityOf(body)));
}

function quantityOf(body: unknown): number {
  const quantity = typeof body === 'object' && body !== null ? (body as { quantity?: unknown }).quantity : undefined;
  if (typeof quantity !== 'number') throw new InventoryError('invalid_quantity', 'the body must be { "quantity": <whole number> }');
  return quantity;
}

/** Run a change and answer the item it left, mapping each inventory error to its status. */
function answer(inventory: Inventory, sku: string, change: () => void): ApiResponse<Item> {
  try {
    change();
    return getItem(inventory, sku);
  } catch (err) {
    if (!(err instanceof InventoryError)) throw err;
    const status = ({ invalid_item: 400, invalid_quantity: 400, unknown_sku: 404, insufficient_stock: 409 } as const)[err.code];
    const code: ApiError['code'] = err.code === 'unknown_sku' || err.code === 'insufficient_stock' ? err.code : 'invalid_request';
    return { status, body: { code, message: err.message } };
  }
}
