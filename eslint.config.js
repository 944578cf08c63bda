// Lint rules that catch the bugs a job runner cannot afford: floating promises,
// misused promises, and `any` leaking into public types.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

/** okengine/header-line: a source file opens with one comment line saying what it is for (TEAM rule). */
const headerLine = {
  meta: {
    type: "suggestion",
    schema: [],
    messages: { missing: "Open the file with one line saying what it is for: `// …` or `/** … */`." },
  },
  create: (context) => ({
    Program(node) {
      const first = context.sourceCode.lines[0] ?? "";
      if (!/^(\/\/ \S|\/\*\* \S)/.test(first))
        context.report({ node, loc: { line: 1, column: 0 }, messageId: "missing" });
    },
  }),
};

/** Lower layers never import upper ones (docs/architecture.md); tests may reach anywhere. */
const upward = (...dirs) => ({
  "no-restricted-imports": [
    "error",
    {
      patterns: dirs.map((d) => ({
        group: [`**/${d}/*`, `../${d}/*`, `./${d}/*`],
        message: `This layer must not import ${d}/ (see docs/architecture.md "Layers").`,
      })),
    },
  ],
});
const LIBRARY_TESTS = [
  "**/*.test.ts",
  "**/*test-helper.ts",
  "**/test-support.ts",
  "src/store/conformance/**",
];

export default tseslint.config(
  {
    ignores: [
      "dist/**",
      ".test-build*/**",
      "node_modules/**",
      "bench/node_modules/**",
      "bench/results/**",
      "scratch/**",
      "**/.oke/**",
      // Projects with their own tsconfig (paths aliases); type-checked by `npm run typecheck`.
      "examples/**",
      "src/cli/fixtures/**",
      // The starter `oke init` copies: type-checked and tested as an app of its own (test/package.test.ts).
      "templates/**",
      // Three lines of CommonJS that only throw (what require("okengine") loads); no project covers .cjs.
      "bin/esm-only.cjs",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ["vitest.config.ts"] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/require-await": "off",
      "@typescript-eslint/only-throw-error": "off",
      "no-console": "error",
    },
  },
  {
    files: ["**/*.test.ts", "test/**", "bench/**", "src/cli/**", "examples/**", "bin/**"],
    rules: {
      "no-console": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-non-null-assertion": "off",
    },
  },
  {
    files: ["src/**/*.ts", "test/**/*.ts"],
    plugins: { okengine: { rules: { "header-line": headerLine } } },
    rules: { "okengine/header-line": "error" },
  },
  {
    files: ["src/{fx,http,signal,durable,store,clock,flow,log,channel}/**/*.ts", "src/{errors,id,schema}.ts"],
    ignores: LIBRARY_TESTS,
    rules: upward("app", "cli", "project"),
  },
  { files: ["src/project/**/*.ts"], ignores: LIBRARY_TESTS, rules: upward("cli") },
  {
    files: ["src/store/**/*.ts"],
    ignores: LIBRARY_TESTS,
    rules: upward("app", "cli", "project", "fx", "signal", "durable", "flow", "http"),
  },
  {
    files: ["src/http/**/*.ts"],
    ignores: LIBRARY_TESTS,
    rules: upward("app", "cli", "project", "fx", "durable"),
  },
  { files: ["**/*.js"], ...tseslint.configs.disableTypeChecked },
);
