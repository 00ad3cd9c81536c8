import { describe, expect, it } from 'vitest';
import { mediaTypeOf } from './artifacts.ts';
import { plainText, titleOf } from './corpus.ts';

describe('corpus documents', () => {
  it('a title is the first heading, the HTML title, or the file name', () => {
    expect(titleOf('a.md', 'intro\n## Durable runs\ntext')).toBe('Durable runs');
    expect(titleOf('b.html', '<html><title>Guide</title></html>')).toBe('Guide');
    expect(titleOf('dir/notes.txt', 'no heading')).toBe('notes.txt');
  });
  it('HTML is reduced to its readable text; other files are kept as they are', () => {
    expect(plainText('p.html', '<style>x{}</style><p>Fish &amp; chips&nbsp;<b>now</b></p><script>alert(1)</script>')).toBe(' Fish & chips now ');
    expect(plainText('p.md', '# <b>kept</b>')).toBe('# <b>kept</b>');
  });
});

describe('mediaTypeOf', () => {
  it('by extension; unknown text as plain text, anything else as bytes', () => {
    expect(mediaTypeOf('report.md')).toBe('text/markdown; charset=utf-8');
    expect(mediaTypeOf('data.bin', Buffer.from('plain words'))).toBe('text/plain; charset=utf-8');
    expect(mediaTypeOf('data.bin', Buffer.from([1, 0, 2]))).toBe('application/octet-stream');
  });
});
