import { Inventory } from './inventory.ts';
import { getItem, listItems, postDelivery, postShipment } from './routes.ts';
import { sampleItems } from './sample.ts';

describe('the inventory API', () => {
  it('GET /items lists every item; GET /items/:sku finds one or answers 404', () => {
    const inventory = new Inventory(sampleItems());
    const list = listItems(inventory);
    expect(list.status).toBe(200);
    expect(list.body).toHaveLength(4);
    expect(getItem(inventory, 'NUT-M6')).toMatchObject({ status: 200, body: { name: 'Hex nut M6', quantity: 400 } });
    expect(getItem(inventory, 'NOPE')).toEqual({ status: 404, body: { code: 'unknown_sku', message: 'no item with SKU NOPE' } });
  });

  it('POST deliveries and shipments answer the updated item', () => {
    const inventory = new Inventory(sampleItems());
    expect(postDelivery(inventory, 'TAPE-PTFE', { quantity: 20 })).toMatchObject({ status: 200, body: { sku: 'TAPE-PTFE', quantity: 20 } });
    expect(postShipment(inventory, 'TAPE-PTFE', { quantity: 5 })).toMatchObject({ status: 200, body: { quantity: 15 } });
  });

  it('maps each failure to its status: 400 for a bad body, 404 for an unknown SKU, 409 for too little stock', () => {
    const inventory = new Inventory(sampleItems());
    expect(postDelivery(inventory, 'BOLT-M6', { qty: 3 })).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    expect(postDelivery(inventory, 'BOLT-M6', { quantity: -3 })).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    expect(postShipment(inventory, 'NOPE', { quantity: 1 })).toMatchObject({ status: 404, body: { code: 'unknown_sku' } });
    expect(postShipment(inventory, 'DRILL-18V', { quantity: 9 })).toMatchObject({ status: 409, body: { code: 'insufficient_stock' } });
    expect(getItem(inventory, 'DRILL-18V').body).toMatchObject({ quantity: 3 });
  });
});
