import type { Item } from './types.ts';

/** A rule of the inventory was broken; `code` says which (the API maps it to a status). */
export class InventoryError extends Error {
  readonly code: 'invalid_item' | 'invalid_quantity' | 'unknown_sku' | 'insufficient_stock';
  constructor(code: InventoryError['code'], message: string) {
    super(message);
    this.name = 'InventoryError';
    this.code = code;
  }
}

/** The stock of one warehouse, by SKU. Quantities change only through `receive` and `ship`. */
export class Inventory {
  readonly #items = new Map<string, Item>();

  /** Start from a list of items: SKUs unique, numbers whole and not negative. */
  constructor(items: readonly Item[] = []) {
    for (const item of items) {
      if (this.#items.has(item.sku)) throw new InventoryError('invalid_item', `SKU ${item.sku} is listed twice`);
      if (![item.quantity, item.reorderLevel, item.unitPriceCents].every((n) => Number.isInteger(n) && n >= 0)) {
        throw new InventoryError('invalid_item', `SKU ${item.sku}: quantity, reorder level and price must be whole numbers, not negative`);
      }
      this.#items.set(item.sku, { ...item });
    }
  }

  /** The item with this SKU (a copy), or undefined. */
  get(sku: string): Item | undefined {
    const item = this.#items.get(sku);
    return item && { ...item };
  }

  /** Every item (copies), sorted by SKU. */
  list(): Item[] {
    return [...this.#items.values()].map((item) => ({ ...item })).sort((a, b) => a.sku.localeCompare(b.sku));
  }

  /** Add a delivery of `quantity` units to stock; returns the new quantity on hand. */
  receive(sku: string, quantity: number): number {
    const item = this.#find(sku);
    item.quantity += checkedQuantity(quantity);
    return item.quantity;
  }

  /** Take `quantity` units out of stock for a shipment (never below zero); returns the new quantity on hand. */
  ship(sku: string, quantity: number): number {
    const item = this.#find(sku);
    if (checkedQuantity(quantity) > item.quantity) {
      throw new InventoryError('insufficient_stock', `only ${item.quantity} of ${sku} on hand, ${quantity} asked for`);
    }
    item.quantity -= quantity;
    return item.quantity;
  }

  /** What the stock on hand is worth, in cents. */
  valueCents(): number {
    let total = 0;
    for (const item of this.#items.values()) total += item.quantity * item.unitPriceCents;
    return total;
  }

  #find(sku: string): Item {
    const item = this.#items.get(sku);
    if (!item) throw new InventoryError('unknown_sku', `no item with SKU ${sku}`);
    return item;
  }
}

function checkedQuantity(quantity: number): number {
  if (!Number.isInteger(quantity) || quantity < 1) throw new InventoryError('invalid_quantity', `quantity must be a whole number of at least 1, not ${quantity}`);
  return quantity;
}
