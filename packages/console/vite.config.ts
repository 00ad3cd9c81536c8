import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The console is built to dist/ (served by the gateway at /). `vite` (dev) proxies the API to a
// local gateway, so the console can be worked on with hot reload against a running Baton.
export default defineConfig({
  plugins: [react()],
  base: '/',
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true, chunkSizeWarningLimit: 1024 },
  server: { proxy: { '/v1': 'http://127.0.0.1:8080', '/healthz': 'http://127.0.0.1:8080' } },
});
