import { escapeHtml, formatPrice, formatUnits } from './format.ts';

describe('formatting', () => {
  it('formats cents as a price', () => {
    expect(formatPrice(1250)).toBe('$12.50');
    expect(formatPrice(4)).toBe('$0.04');
    expect(formatPrice(899_900)).toBe('$8,999.00');
  });

  it('counts units, singular and plural', () => {
    expect(formatUnits(1)).toBe('1 unit');
    expect(formatUnits(0)).toBe('0 units');
    expect(formatUnits(1200)).toBe('1,200 units');
  });

  it('escapes the characters HTML gives a meaning to', () => {
    expect(escapeHtml(`<a href="x">Tom & Jerry's</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;');
  });
});
