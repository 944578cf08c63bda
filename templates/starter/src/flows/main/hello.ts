import { flow, http, on } from "okengine";

/** GET /hello — the smallest HTTP flow. */
export const hello = on(http.get(), flow({ do: () => ({ message: "Hello from okengine" }) }));
