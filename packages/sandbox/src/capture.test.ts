import { describe, expect, it } from 'vitest';
import { capture } from './confine.ts';

describe("a command's output, kept", () => {
  it('whole under the limit; past it, its first half and its last half with what was left out said between — a summary printed last survives (the first 1 MB alone had lost pytest\'s)', () => {
    const small = capture(8);
    small.push(Buffer.from('abc'));
    small.push(Buffer.from('def'));
    expect([small.text(), small.total()]).toEqual(['abcdef', 6]);
    const big = capture(8);
    for (const chunk of ['abc', 'defgh', 'ijklmnop', 'qr', 'stuvwxyz']) big.push(Buffer.from(chunk));
    expect(big.text()).toBe('abcd\n[… 18 bytes left out here …]\nwxyz');
    expect(big.total()).toBe(26);
    // Many small writes: the tail stays the last bytes.
    const many = capture(10);
    for (let i = 0; i < 1000; i++) many.push(Buffer.from(`${i % 10}`));
    expect(many.text()).toBe('01234\n[… 990 bytes left out here …]\n56789');
    // UTF-8: whole when nothing is left out, however the halves cut it (it had become U+FFFD);
    // cut at characters' edges when something is.
    const whole = capture(12);
    whole.push(Buffer.from('abcé€xy'));
    expect(whole.text()).toBe('abcé€xy');
    const cut = capture(8);
    cut.push(Buffer.from('abcé€€€€xyé€'));
    expect(cut.text()).toBe('abc\n[… 18 bytes left out here …]\n€');
    expect(cut.text()).not.toContain('\uFFFD');
  });
});
