import type { Item } from './types.ts';

/** A small warehouse to start from (tests and demos): some items well stocked, some running low. */
export function sampleItems(): Item[] {
  return [
    { sku: 'BOLT-M6', name: 'Hex bolt M6 × 30', quantity: 40, reorderLevel: 50, unitPriceCents: 12 },
    { sku: 'NUT-M6', name: 'Hex nut M6', quantity: 400, reorderLevel: 100, unitPriceCents: 4 },
    { sku: 'DRILL-18V', name: 'Cordless drill 18 V', quantity: 3, reorderLevel: 2, unitPriceCents: 8_999 },
    { sku: 'TAPE-PTFE', name: 'PTFE tape <12 mm>', quantity: 0, reorderLevel: 10, unitPriceCents: 150 },
  ];
}
