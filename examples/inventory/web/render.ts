import type { ApiResponse, Item } from '../api/types.ts';
import { escapeHtml, formatPrice, formatUnits } from './format.ts';

/** One table row for an item: SKU, name, units on hand (or "out of stock") and unit price. */
export function renderItemRow(item: Item): string {
  const stock = item.quantity === 0 ? '<em>out of stock</em>' : formatUnits(item.quantity);
  return `<tr><td>${escapeHtml(item.sku)}</td><td>${escapeHtml(item.name)}</td><td>${stock}</td><td>${formatPrice(item.unitPriceCents)}</td></tr>`;
}

/** The stock table: a header row and a row per item, or a note when there are none. */
export function renderItemTable(items: readonly Item[]): string {
  if (items.length === 0) return '<p class="empty">No items in stock.</p>';
  const head = '<tr><th>SKU</th><th>Name</th><th>On hand</th><th>Unit price</th></tr>';
  return `<table class="stock">\n<thead>${head}</thead>\n<tbody>\n${items.map(renderItemRow).join('\n')}\n</tbody>\n</table>`;
}

/** The page for an answer of `GET /items`: the stock table, or the error's message. */
export function renderItemsPage(response: ApiResponse<Item[]>): string {
  if (response.status !== 200) return `<p class="error" role="alert">${escapeHtml(response.body.message)}</p>`;
  return `<h1>Stock</h1>\n${renderItemTable(response.body)}`;
}
