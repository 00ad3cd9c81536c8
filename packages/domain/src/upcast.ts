import { CURRENT_SCHEMA_VERSION, type EventType } from './events.ts';

/**
 * Old event shapes are upcast on read, never rewritten in the log. Register a function per
 * (type, fromVersion) that maps data of that version to the next; reading applies them in
 * order up to CURRENT_SCHEMA_VERSION.
 */
type Upcaster = (data: Record<string, unknown>) => Record<string, unknown>;
const upcasters: Partial<Record<EventType, Record<number, Upcaster>>> = {
  // Example for a future v2 of TaskSubmitted:
  // TaskSubmitted: { 1: (d) => ({ ...d, priority: 'normal' }) },
};

export class UnknownSchemaVersionError extends Error {
  constructor(type: string, version: number) {
    super(`event ${type} has schema version ${version}, newer than this code understands (${CURRENT_SCHEMA_VERSION})`);
    this.name = new.target.name;
  }
}

export function upcast(type: EventType, schemaVersion: number, data: Record<string, unknown>, registry = upcasters): Record<string, unknown> {
  if (schemaVersion > CURRENT_SCHEMA_VERSION) throw new UnknownSchemaVersionError(type, schemaVersion);
  let d = data;
  for (let v = schemaVersion; v < CURRENT_SCHEMA_VERSION; v++) {
    const f = registry[type]?.[v];
    if (f) d = f(d);
  }
  return d;
}
