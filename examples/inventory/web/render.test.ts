import { Inventory } from '../api/inventory.ts';
import { listItems } from '../api/routes.ts';
import { sampleItems } from '../api/sample.ts';
import { renderItemRow, renderItemsPage, renderItemTable } from './render.ts';

describe('the stock page', () => {
  it('renders an item as a row, escaping its text', () => {
    const tape = sampleItems().find((item) => item.sku === 'TAPE-PTFE')!;
    expect(renderItemRow(tape)).toBe('<tr><td>TAPE-PTFE</td><td>PTFE tape &lt;12 mm&gt;</td><td><em>out of stock</em></td><td>$1.50</td></tr>');
  });

  it('renders what GET /items answers as a table, one row per item in order', () => {
    const html = renderItemsPage(listItems(new Inventory(sampleItems())));
    expect(html).toMatch(/^<h1>Stock<\/h1>\n<table class="stock">/);
    expect(html.match(/<tr><td>/g)).toHaveLength(4);
    expect(html.indexOf('BOLT-M6')).toBeLessThan(html.indexOf('NUT-M6'));
    expect(html).toContain('<td>400 units</td><td>$0.04</td>');
  });

  it('says so when there is nothing to show, and shows an error answer as an alert', () => {
    expect(renderItemTable([])).toBe('<p class="empty">No items in stock.</p>');
    expect(renderItemsPage({ status: 409, body: { code: 'insufficient_stock', message: 'only 3 <left>' } })).toBe('<p class="error" role="alert">only 3 &lt;left&gt;</p>');
  });
});
