import { describe, expect, it } from 'vitest';
import { assertPublicUrl, EgressDeniedError } from './egress.ts';

describe('webhook egress guard', () => {
  it('refuses loopback, private, link-local/metadata and IPv6 local addresses', async () => {
    for (const url of ['http://127.0.0.1/x', 'http://10.1.2.3/', 'http://172.20.0.1/', 'http://192.168.1.1/', 'http://169.254.169.254/latest/meta-data', 'http://[::1]/', 'http://[fd00::1]/', 'http://0.0.0.0/', 'http://[::ffff:10.0.0.1]/']) {
      await expect(assertPublicUrl(url), url).rejects.toBeInstanceOf(EgressDeniedError);
    }
  });
  it('checks every address a name resolves to', async () => {
    await expect(assertPublicUrl('https://hooks.example.test/x', async () => ['93.184.216.34', '10.0.0.5'])).rejects.toThrow(/10\.0\.0\.5/);
    await expect(assertPublicUrl('https://hooks.example.test/x', async () => ['93.184.216.34'])).resolves.toBeUndefined();
  });
});
