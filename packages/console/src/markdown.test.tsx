import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { RenderedMarkdown } from '../ui/Markdown.tsx';

const render = (text: string): string => renderToStaticMarkup(<RenderedMarkdown>{text}</RenderedMarkdown>);

describe('RenderedMarkdown', () => {
  it('links only absolute http(s) and mailto, as the mails do: smb:, search-ms:, //host and relative paths stay text; images are links, never loaded', () => {
    const html = render('[brief](smb://evil.example/share) [s](search-ms:query=x) [h](//evil.example) [r](../x) [site](https://example.com/a) [m](mailto:ann@example.com) ![pic](https://img.example/p.png) ![local](a.png)');
    expect([...html.matchAll(/href="([^"]*)"/g)].map((m) => m[1])).toEqual(['https://example.com/a', 'mailto:ann@example.com', 'https://img.example/p.png']);
    expect(html).toContain('<span>brief</span> <span>s</span> <span>h</span> <span>r</span>');
    expect(html).toContain('<span class="image-link">image: local</span>');
    expect(html).not.toContain('<img');
    // A footnote and its way back stay links within the page; a link's title is kept.
    const notes = render('A claim.[^1] [t](https://example.com "the title")\n\n[^1]: The source.');
    expect(notes).toMatch(/<a href="#user-content-fn-1"[^>]*>1<\/a>/);
    expect(notes).toMatch(/<a href="#user-content-fnref-1"[^>]*>↩<\/a>/);
    expect(notes).toContain('<a href="https://example.com" title="the title" target="_blank" rel="noopener noreferrer">t</a>');
  });
});
