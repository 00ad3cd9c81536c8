import { describe, expect, it } from 'vitest';
import { assertPublicUrl, EgressDeniedError } from './egress.ts';

describe('webhook egress guard', () => {
  it('refuses loopback, private, link-local/metadata and IPv6 local addresses', async () => {
    for (const url of ['http://127.0.0.1/x', 'http://10.1.2.3/', 'http://172.20.0.1/', 'http://192.168.1.1/', 'http://169.254.169.254/latest/meta-data', 'http://[::1]/', 'http://[fd00::1]/', 'http://0.0.0.0/', 'http://[::ffff:10.0.0.1]/']) {
      await expect(assertPublicUrl(url), url).rejects.toBeInstanceOf(EgressDeniedError);
    }
  });
  it('judges the URL as WHATWG parses it (any spelling of 127.0.0.1, mapped IPv6) and names no credentials', async () => {
    for (const url of ['http://2130706433/', 'http://0x7f.1/', 'http://0177.0.0.1/', 'http://127.1/', 'http://[::ffff:127.0.0.1]/', 'http://[fe80::1]/', 'http://localhost./']) {
      await expect(assertPublicUrl(url, async () => ['127.0.0.1']), url).rejects.toBeInstanceOf(EgressDeniedError);
    }
    const err = await assertPublicUrl('http://user:secret@10.0.0.1/h').catch((e: Error) => e);
    expect(String(err)).toMatch(/webhook URL http:\/\/10\.0\.0\.1\/h resolves to 10\.0\.0\.1/);
  });
  it('checks every address a name resolves to', async () => {
    await expect(assertPublicUrl('https://hooks.example.test/x', async () => ['93.184.216.34', '10.0.0.5'])).rejects.toThrow(/10\.0\.0\.5/);
    await expect(assertPublicUrl('https://hooks.example.test/x', async () => ['93.184.216.34'])).resolves.toBeUndefined();
  });
});
