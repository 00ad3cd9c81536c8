import { describe, expect, it } from 'vitest';
import { isNonPublicAddress, redactCredentials, webhookUrlProblem } from './webhook-url.ts';

const strict = { allowPrivateNetworks: false };

describe('webhookUrlProblem', () => {
  it('refuses non-public addresses in every spelling, and localhost', () => {
    for (const url of [
      'http://127.0.0.1/hook', 'http://2130706433/', 'http://0x7f.1/', 'http://0177.0.0.1/', 'http://127.1/', 'http://%31%32%37.0.0.1/',
      'http://10.1.2.3/', 'http://172.20.0.1/', 'http://192.168.1.1:8080/', 'http://100.64.0.1/', 'http://169.254.169.254/latest/meta-data', 'http://0.0.0.0/', 'http://0/', 'http://224.0.0.1/', 'http://255.255.255.255/',
      'http://[::1]/', 'http://[::]/', 'http://[::ffff:127.0.0.1]/', 'http://[::ffff:10.0.0.1]/', 'http://[::127.0.0.1]/', 'http://[fe80::1]/', 'http://[fc00::]/', 'http://[fd12:3456::1]/', 'http://[ff02::1]/', 'http://[64:ff9b::7f00:1]/', 'http://[64:ff9b::127.0.0.1]/', 'http://[2002:7f00:1::]/',
      'http://localhost/', 'http://LOCALHOST./x', 'https://api.localhost/', 'http://a.b.localhost:3000/',
    ]) {
      expect(webhookUrlProblem(url, strict), url).toMatch(/a webhook may not reach/);
    }
  });

  it('refuses other schemes and credentials, private networks allowed or not', () => {
    for (const opts of [strict, { allowPrivateNetworks: true }]) {
      expect(webhookUrlProblem('ftp://hooks.example.com/', opts)).toMatch(/http\(s\)/);
      expect(webhookUrlProblem('javascript:alert(1)', opts)).toMatch(/http\(s\)/);
      expect(webhookUrlProblem('not a url', opts)).toMatch(/absolute/);
      expect(webhookUrlProblem('http://user:pass@hooks.example.com/', opts)).toMatch(/credentials/);
      expect(webhookUrlProblem('https://token@hooks.example.com/', opts)).toMatch(/credentials/);
      expect(webhookUrlProblem('https://:secret@hooks.example.com/', opts)).toMatch(/credentials/);
    }
  });

  it('accepts public addresses and names (names are checked again, resolved, at delivery); private ones when allowed', () => {
    for (const url of ['https://hooks.example.com/x?y=1', 'http://93.184.216.34/', 'http://[2606:2800:220:1:248:1893:25c8:1946]/', 'http://127.0.0.1.nip.io/', 'http://[::ffff:93.184.216.34]/']) {
      expect(webhookUrlProblem(url, strict), url).toBeNull();
    }
    expect(webhookUrlProblem('http://127.0.0.1:9000/hook', { allowPrivateNetworks: true })).toBeNull();
    expect(webhookUrlProblem('http://localhost/hook', { allowPrivateNetworks: true })).toBeNull();
  });
});

describe('isNonPublicAddress', () => {
  it('classifies resolved addresses, IPv4-mapped ones by their IPv4 address', () => {
    expect(['10.0.0.5', '::1', '::ffff:10.0.0.1', '::ffff:a00:1', 'fe80::1'].map(isNonPublicAddress)).toEqual([true, true, true, true, true]);
    expect(['93.184.216.34', '2606:4700::1111', '::ffff:93.184.216.34'].map(isNonPublicAddress)).toEqual([false, false, false]);
    // An IPv6 address carrying an IPv4 one is judged by it: NAT64 and 6to4 reach 127.0.0.1 and 10.0.0.1 through a gateway.
    expect(['64:ff9b::7f00:1', '64:ff9b::127.0.0.1', '64:FF9B::a00:1', '2002:7f00:1::', '2002:a00:1:1::5', '2002:c0a8:101::1'].map(isNonPublicAddress)).toEqual([true, true, true, true, true, true]);
    expect(['64:ff9b::5db8:d822', '2002:5db8:d822::1'].map(isNonPublicAddress)).toEqual([false, false]); // 93.184.216.34 that way
    // Local-use NAT64, Teredo, discard-only and documentation prefixes.
    expect(['64:ff9b:1::a00:1', '2001:0:4136:e378:8000:63bf:3fff:fdd2', '100::1', '2001:db8::1', '3fff::1', 'fec0::1', '::ffff:0:7f00:1', '::ffff:0:10.0.0.1'].map(isNonPublicAddress)).toEqual([true, true, true, true, true, true, true, true]);
    expect(isNonPublicAddress('::ffff:0:5db8:d822')).toBe(false);
    expect(() => isNonPublicAddress('example.com')).toThrow(/not an IP address/);
  });
});

describe('redactCredentials', () => {
  it('leaves out the userinfo of every URL in a text, and nothing else', () => {
    expect(redactCredentials('http://user:pass@hooks.example.com/x')).toBe('http://hooks.example.com/x');
    expect(redactCredentials('webhook URL https://a@b@host:8443/p?q=x@y resolves to 10.0.0.1')).toBe('webhook URL https://host:8443/p?q=x@y resolves to 10.0.0.1');
    expect(redactCredentials('https://hooks.example.com/x?to=me@example.com mailto:me@example.com')).toBe('https://hooks.example.com/x?to=me@example.com mailto:me@example.com');
  });
});
