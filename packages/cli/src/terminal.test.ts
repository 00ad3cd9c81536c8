import { describe, expect, it } from 'vitest';
import { terminalSafe } from './terminal.ts';

describe('terminalSafe', () => {
  it('shows what a model wrote as text: escape sequences left out, other controls and a lone carriage return as U+FFFD; tabs, line ends and any script kept', () => {
    expect(terminalSafe('\u001b[31mred\u001b[0m \u001b]0;pwned\u0007title \u001b[2Jclear')).toBe('red title clear');
    expect(terminalSafe('bell\u0007 nul\u0000 c1\u009b x')).toBe('bell\uFFFD nul\uFFFD c1\uFFFD x');
    expect(terminalSafe('done\rfake prompt $ ')).toBe('done\uFFFDfake prompt $ ');
    expect(terminalSafe('a\tb\r\nc\n漢字 émoji 😀')).toBe('a\tb\r\nc\n漢字 émoji 😀');
    // Bidirectional overrides and isolates would show what follows reversed; the scripts themselves need none.
    expect(terminalSafe('report\u202Etxt.exe and \u2066x\u2069 שלום مرحبا')).toBe('report\uFFFDtxt.exe and \uFFFDx\uFFFD שלום مرحبا');
  });
});
