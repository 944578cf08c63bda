/** Standard Schema helpers: validate with any library (zod, valibot, arktype) and describe its issues. */
import type { StandardSchemaV1 } from "@standard-schema/spec";

export type { StandardSchemaV1 };
export type Schema<Out = unknown> = StandardSchemaV1<unknown, Out>;
export type Infer<S> = S extends StandardSchemaV1<unknown, infer O> ? O : unknown;

export interface SchemaIssue {
  path: string;
  message: string;
}

export type Validated<T> = { ok: true; value: T } | { ok: false; issues: SchemaIssue[] };

const pathOf = (issue: StandardSchemaV1.Issue): string =>
  (issue.path ?? [])
    .map((seg) => (typeof seg === "object" && seg !== null && "key" in seg ? seg.key : seg))
    .map(String)
    .join(".");

/** Runs any Standard Schema (zod 4, valibot, arktype …) and normalises its issues. */
export async function validate<T>(
  schema: StandardSchemaV1<unknown, T>,
  value: unknown,
): Promise<Validated<T>> {
  let result = schema["~standard"].validate(value);
  if (result instanceof Promise) result = await result;
  if (result.issues) {
    return { ok: false, issues: result.issues.map((i) => ({ path: pathOf(i), message: i.message })) };
  }
  return { ok: true, value: result.value };
}

/** One line naming each failing field, for error messages. */
export const describeIssues = (issues: readonly SchemaIssue[]): string =>
  issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ");

// ArkType schemas are functions, zod and valibot ones objects.
export const isSchema = (v: unknown): v is StandardSchemaV1 =>
  (typeof v === "object" || typeof v === "function") && v !== null && "~standard" in v;
