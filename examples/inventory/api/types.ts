/** One stock-keeping unit: how many are on hand and when to order more. */
export interface Item {
  /** Stock-keeping unit, e.g. `BOLT-M6`; unique within an inventory. */
  sku: string;
  name: string;
  /** Units on hand (a whole number, never negative). */
  quantity: number;
  /** At or below this many units the item should be reordered. */
  reorderLevel: number;
  /** Price of one unit in cents (whole numbers: no floating-point money). */
  unitPriceCents: number;
}

/** The body of every error answer: a stable code for programs and a message for people. */
export interface ApiError {
  code: 'invalid_request' | 'unknown_sku' | 'insufficient_stock';
  message: string;
}

/** What an API function answers: an HTTP-like status and a JSON-serialisable body. */
export type ApiResponse<T> = { status: 200; body: T } | { status: 400 | 404 | 409; body: ApiError };
