import { describe, expect, it } from 'vitest';
import { apiKeyProblems, gatewayLimits, loadGatewayConfig, parseApiKeys } from './config.ts';
import { DEFAULT_LIMITS } from './deps.ts';

describe('gateway config: limits', () => {
  it('defaults, 0 writes/s turning the rate limit off, and every bad value named', () => {
    const c = loadGatewayConfig({});
    expect(gatewayLimits(c)).toEqual(DEFAULT_LIMITS);
    expect(c.WEBHOOK_ALLOW_PRIVATE_NETWORKS).toBe(false);
    const set = loadGatewayConfig({ RATE_LIMIT_WRITES_PER_S: '0', RATE_LIMIT_BURST: '5', SSE_MAX_PER_TENANT: '2', SSE_MAX_CONNECTIONS: '3', STUCK_AFTER_MS: '5000', SSE_STALL_MS: '2500', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
    expect(gatewayLimits(set)).toEqual({ writesPerS: 0, burst: 5, ssePerTenant: 2, sseConnections: 3, stuckAfterMs: 5000, sseStallMs: 2500 });
    expect(set.WEBHOOK_ALLOW_PRIVATE_NETWORKS).toBe(true);
    expect(() => loadGatewayConfig({ RATE_LIMIT_WRITES_PER_S: '-1', RATE_LIMIT_BURST: '0', SSE_MAX_PER_TENANT: 'many', SSE_MAX_CONNECTIONS: '0', SSE_STALL_MS: '10' })).toThrow(
      /RATE_LIMIT_WRITES_PER_S[\s\S]*RATE_LIMIT_BURST[\s\S]*SSE_MAX_PER_TENANT[\s\S]*SSE_MAX_CONNECTIONS[\s\S]*SSE_STALL_MS/,
    );
  });
});

describe('gateway config: default budgets', () => {
  it('JSON by tenant ("*" for the rest); bad JSON, tenant names and limits are named', () => {
    expect(loadGatewayConfig({}).TENANT_BUDGETS).toEqual({});
    expect(loadGatewayConfig({ TENANT_BUDGETS: '{"acme":{"usd":5},"*":{"tokens":2000000}}' }).TENANT_BUDGETS).toEqual({ acme: { usd: 5 }, '*': { tokens: 2_000_000 } });
    expect(() => loadGatewayConfig({ TENANT_BUDGETS: '{acme' })).toThrow(/TENANT_BUDGETS: must be JSON/);
    expect(() => loadGatewayConfig({ TENANT_BUDGETS: '{"acme":{}}' })).toThrow(/TENANT_BUDGETS\.acme: name usd and\/or tokens/);
    expect(() => loadGatewayConfig({ TENANT_BUDGETS: '{"acme":{"usd":-1}}' })).toThrow(/TENANT_BUDGETS\.acme\.usd/);
    expect(() => loadGatewayConfig({ TENANT_BUDGETS: '{"a b":{"usd":1}}' })).toThrow(/TENANT_BUDGETS/);
  });
});

describe('gateway config: mail', () => {
  it('TENANT_NOTIFY: JSON by tenant, checked like a task’s notify; MAIL_LINK_SECRET at least 32 characters', () => {
    expect(loadGatewayConfig({}).TENANT_NOTIFY).toEqual({});
    expect(loadGatewayConfig({ TENANT_NOTIFY: '{"*":{"email":{"to":["ops@example.com"]}}}' }).TENANT_NOTIFY).toEqual({ '*': { email: { to: ['ops@example.com'], on: ['awaiting_input', 'completed', 'failed'] } } });
    expect(() => loadGatewayConfig({ TENANT_NOTIFY: '{"acme":{"email":{"to":["nope"]}}}' })).toThrow(/TENANT_NOTIFY\.acme\.email\.to\.0: must be an email address/);
    // Where mail may go: unset, anywhere; set, JSON by tenant of domains and addresses; a tenant's default recipients must be among them.
    expect(loadGatewayConfig({}).MAIL_ALLOWED_RECIPIENTS).toBeUndefined();
    expect(loadGatewayConfig({ MAIL_ALLOWED_RECIPIENTS: '{"acme":["Acme.Example","*.partner.example"],"*":["ops@example.com"]}' }).MAIL_ALLOWED_RECIPIENTS).toEqual({ acme: ['acme.example', '*.partner.example'], '*': ['ops@example.com'] });
    expect(() => loadGatewayConfig({ MAIL_ALLOWED_RECIPIENTS: '{"acme":["https://acme.example"],"beta":[]}' })).toThrow(/MAIL_ALLOWED_RECIPIENTS\.acme\.0: must be a domain[\s\S]*MAIL_ALLOWED_RECIPIENTS\.beta: name at least one domain or address/);
    expect(() => loadGatewayConfig({ MAIL_ALLOWED_RECIPIENTS: '{"acme":["acme.example"]}', TENANT_NOTIFY: '{"acme":{"email":{"to":["ops@gmail.com"]}}}' })).toThrow(/TENANT_NOTIFY\.acme: ops@gmail\.com: this deployment does not mail that address for tenant 'acme'/);
    // `*`'s default is applied less what each named tenant may not mail (at submit); it must suit the tenants the rules do not name.
    expect(() => loadGatewayConfig({ MAIL_ALLOWED_RECIPIENTS: '{"acme":["acme.example"],"*":["example.org"]}', TENANT_NOTIFY: '{"*":{"email":{"to":["ops@example.org"]}}}' })).not.toThrow();
    expect(() => loadGatewayConfig({ MAIL_ALLOWED_RECIPIENTS: '{"acme":["acme.example"]}', TENANT_NOTIFY: '{"*":{"email":{"to":["ops@example.org"]}}}' })).not.toThrow();
    expect(() => loadGatewayConfig({ MAIL_ALLOWED_RECIPIENTS: '{"*":["example.org"]}', TENANT_NOTIFY: '{"*":{"email":{"to":["ops@gmail.com"]}}}' })).toThrow(/TENANT_NOTIFY\.\*: ops@gmail\.com: this deployment does not mail that address for the tenants MAIL_ALLOWED_RECIPIENTS does not name/);
    expect(() => loadGatewayConfig({ MAIL_LINK_SECRET: 'short' })).toThrow(/MAIL_LINK_SECRET: must be at least 32 characters/);
  });
});

describe('gateway config: API keys', () => {
  it('key:tenant pairs; a key given twice (to one tenant or two) is refused by position, the key never shown', () => {
    expect(loadGatewayConfig({ BATON_API_KEYS: 'key-of-acme-000001:acme, key-of-beta-000001:beta' }).BATON_API_KEYS).toMatch(/acme/);
    let message = '';
    try {
      loadGatewayConfig({ BATON_API_KEYS: 'sharedkey-1234567890:acme,other-key-123456789:acme,sharedkey-1234567890:beta' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/BATON_API_KEYS: pair 3 repeats the key of pair 1: a key belongs to one tenant/);
    expect(message).not.toMatch(/sharedkey/);
  });

  it('one line each, or comma-separated, with # comment lines; BATON_API_KEYS and BATON_API_KEYS_FILE not both', () => {
    expect(parseApiKeys('# acme\nkey-of-acme-000001:acme\n\nkey-of-beta-000001:beta, key-of-beta-000002:beta\n')).toEqual(new Map([['key-of-acme-000001', 'acme'], ['key-of-beta-000001', 'beta'], ['key-of-beta-000002', 'beta']]));
    expect(apiKeyProblems('key-of-acme-000001:acme,short:acme')).toEqual(['must be comma-separated key:tenant pairs: a key of 16 or more characters without ":" or white space, a tenant of 1–64 letters, digits, "_" or "-" (not so: pair 2)']);
    // A comment may hold a comma; a BOM and CRLF line ends (a file written on Windows) are fine.
    expect(apiKeyProblems('# acme, the old key\r\nkey-of-acme-000001:acme\r\n')).toEqual([]);
    expect(parseApiKeys('\uFEFFkey-of-acme-000001:acme\r\n')).toEqual(new Map([['key-of-acme-000001', 'acme']]));
    // Set but empty (a Secret's key left blank, compose's ${BATON_API_KEYS_FILE:-}) would be an open API: refused.
    expect(() => loadGatewayConfig({ BATON_API_KEYS_FILE: '' })).toThrow(/BATON_API_KEYS_FILE: is set but empty/);
    expect(() => loadGatewayConfig({ BATON_API_KEYS: 'key-of-acme-000001:acme', BATON_API_KEYS_FILE: '/etc/baton/keys' })).toThrow(/BATON_API_KEYS_FILE: give BATON_API_KEYS or BATON_API_KEYS_FILE, not both/);
    expect(loadGatewayConfig({ BATON_API_KEYS_FILE: '/etc/baton/keys' }).API_KEYS_RELOAD_MS).toBe(10_000);
  });
});
