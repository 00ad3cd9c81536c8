import { describe, expect, it } from 'vitest';
import { renderMarkdown } from './markdown.ts';

describe('renderMarkdown', () => {
  it('links only absolute http(s) and mailto: smb:, search-ms:, intent:, //host, ftp: and data: stay text (model-written markdown sat beside the Approve button as live links)', () => {
    const html = renderMarkdown(
      '[brief](smb://evil.example/share/brief.docx) [s](search-ms:query=x&crumb=location:%5C%5Cevil) [c](intent://x#Intent;scheme=http;end) [h](//evil.example) [f](ftp://evil.example/x) [b](data:image/png;base64,AAAA) [j](javascript:alert(1)) [w](\\\\evil\\share)',
    );
    expect(html).not.toMatch(/<a /);
    expect(html).toBe('<p>brief s c h f b [j](javascript:alert(1)) w</p>\n');
    const ok = renderMarkdown('[site](https://example.com/a?b=1) [mail](mailto:ann@example.com) [plain](HTTP://EXAMPLE.COM) see https://x.example/y');
    expect([...ok.matchAll(/<a href="([^"]+)"/g)].map((m) => m[1])).toEqual(['https://example.com/a?b=1', 'mailto:ann@example.com', 'HTTP://EXAMPLE.COM', 'https://x.example/y']);
  });
});
