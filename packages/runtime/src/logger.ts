import { logContext } from '@baton/telemetry';
import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * JSON logs (pino) with the service name; pretty-printed when asked (the dev launcher does its own).
 * A line written inside traced or task-scoped work carries `trace_id`, `span_id` and `task_id`.
 */
export function createLogger(service: string, opts: { level?: string; pretty?: boolean; /** Where lines go (default stdout). */ destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      name: service,
      level: opts.level ?? 'info',
      base: { service },
      mixin: logContext,
      redact: { paths: ['req.headers.authorization', 'headers.authorization', '*.apiKey', '*.password'], censor: '[redacted]' },
      ...(opts.pretty ? { transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname,service' } } } : {}),
    },
    ...(opts.destination ? [opts.destination] : []),
  );
}

export const silentLogger = (): Logger => pino({ level: 'silent' });
