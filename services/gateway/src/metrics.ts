/** A tiny Prometheus text-format registry (counters and gauges with labels). */
export class Metrics {
  private readonly counters = new Map<string, { help: string; values: Map<string, number> }>();
  private readonly gauges = new Map<string, { help: string; read: () => number }>();

  counter(name: string, help: string): (labels?: Record<string, string>, by?: number) => void {
    const c = { help, values: new Map<string, number>() };
    this.counters.set(name, c);
    return (labels = {}, by = 1) => {
      const key = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`).join(',');
      c.values.set(key, (c.values.get(key) ?? 0) + by);
    };
  }

  gauge(name: string, help: string, read: () => number): void {
    this.gauges.set(name, { help, read });
  }

  render(): string {
    const out: string[] = [];
    for (const [name, c] of this.counters) {
      out.push(`# HELP ${name} ${c.help}`, `# TYPE ${name} counter`);
      for (const [labels, v] of c.values) out.push(`${name}${labels ? `{${labels}}` : ''} ${v}`);
    }
    for (const [name, g] of this.gauges) out.push(`# HELP ${name} ${g.help}`, `# TYPE ${name} gauge`, `${name} ${g.read()}`);
    return `${out.join('\n')}\n`;
  }
}
