import pino, { type Logger } from 'pino';

export type { Logger };

/** JSON logs (pino) with the service name; pretty-printed when asked (the dev launcher does its own). */
export function createLogger(service: string, opts: { level?: string; pretty?: boolean } = {}): Logger {
  return pino({
    name: service,
    level: opts.level ?? 'info',
    base: { service },
    redact: { paths: ['req.headers.authorization', 'headers.authorization', '*.apiKey', '*.password'], censor: '[redacted]' },
    ...(opts.pretty ? { transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname,service' } } } : {}),
  });
}

export const silentLogger = (): Logger => pino({ level: 'silent' });
