import { defineConfig } from "vite";

// The chart benchmark page (bench/index.html) as its own build: it never ships in dist/.
// Paths are relative to frontend/, where npm runs it.
export default defineConfig({
  root: "bench",
  base: "./",
  build: { outDir: "../bench-dist", emptyOutDir: true },
});
