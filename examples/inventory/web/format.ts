/** Cents as a price for people, e.g. `1250` → `$12.50`. */
export function formatPrice(cents: number, currency = 'USD', locale = 'en-US'): string {
  return new Intl.NumberFormat(locale, { style: 'currency', currency }).format(cents / 100);
}

/** A count of units, e.g. `1` → `1 unit`, `1200` → `1,200 units`. */
export function formatUnits(count: number, locale = 'en-US'): string {
  return `${new Intl.NumberFormat(locale).format(count)} ${count === 1 ? 'unit' : 'units'}`;
}

/** Text made safe to place in HTML, as element content or inside a quoted attribute. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}
