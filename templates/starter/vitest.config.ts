import { defineConfig } from "vitest/config";
import { okengine } from "okengine/vitest";

// okengine(): `@/` imports, and createTestApp({ project: "." }) loads the app the way `oke` does.
export default defineConfig({ plugins: [okengine()] });
