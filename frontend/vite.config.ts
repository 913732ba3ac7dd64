import { defineConfig } from "vitest/config";

// Plain Preact through the bundler's own JSX transform (tsconfig: jsxImportSource preact);
// no framework plugin is needed.
// `trainboard up` (or uvicorn) on its default address; websockets go through too.
const api = "http://127.0.0.1:8000";

export default defineConfig({
  server: {
    proxy: {
      "/api": { target: api, ws: true, changeOrigin: false },
    },
  },
  build: { outDir: "dist", sourcemap: true },
  test: { include: ["tests/**/*.test.ts"], environment: "node" },
});
