/** Text on one line (every run of white space, line breaks too, one space), cut at `max` characters with `…`. */
export function oneLine(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
