import { Inventory, InventoryError } from './inventory.ts';
import { sampleItems } from './sample.ts';

describe('Inventory', () => {
  it('lists items sorted by SKU, as copies that cannot change the stock', () => {
    const inventory = new Inventory(sampleItems());
    const items = inventory.list();
    expect(items.map((i) => i.sku)).toEqual(['BOLT-M6', 'DRILL-18V', 'NUT-M6', 'TAPE-PTFE']);
    (items[0] as { quantity: number }).quantity = 1_000;
    expect(inventory.get('BOLT-M6')?.quantity).toBe(40);
  });

  it('receives deliveries and ships orders', () => {
    const inventory = new Inventory(sampleItems());
    expect(inventory.receive('BOLT-M6', 60)).toBe(100);
    expect(inventory.ship('BOLT-M6', 25)).toBe(75);
    expect(inventory.ship('DRILL-18V', 3)).toBe(0);
  });

  it('refuses to ship more than is on hand, and changes nothing then', () => {
    const inventory = new Inventory(sampleItems());
    expect(() => inventory.ship('DRILL-18V', 4)).toThrow(expect.objectContaining({ code: 'insufficient_stock' }));
    expect(inventory.get('DRILL-18V')?.quantity).toBe(3);
  });

  it('refuses bad quantities, unknown SKUs and invalid items', () => {
    const inventory = new Inventory(sampleItems());
    expect(() => inventory.receive('BOLT-M6', 0)).toThrow(InventoryError);
    expect(() => inventory.receive('BOLT-M6', 1.5)).toThrow(/whole number/);
    expect(() => inventory.ship('NOPE', 1)).toThrow(expect.objectContaining({ code: 'unknown_sku' }));
    const [first] = sampleItems();
    expect(() => new Inventory([first!, first!])).toThrow(/listed twice/);
    expect(() => new Inventory([{ ...first!, quantity: -1 }])).toThrow(expect.objectContaining({ code: 'invalid_item' }));
  });

  it('values the stock on hand in cents', () => {
    expect(new Inventory(sampleItems()).valueCents()).toBe(40 * 12 + 400 * 4 + 3 * 8_999);
    expect(new Inventory().valueCents()).toBe(0);
  });
});
