/**
 * The engine calls a Kit container run needs beyond `DockerApi`
 * (`docker/docker_api.ts`): an image's user, a create with mounts, stdin
 * and an entrypoint, attach, kill, and inspect-by-id to verify a removal.
 * It speaks to the same socket through its own `npm:dockerode` client and
 * turns failures into the same two errors `DockerApi` throws. (These belong
 * in `DockerApi`; they live here until `docker/` takes them.)
 *
 * Needs what `DockerApi` needs: `--allow-net=unix:<socket>`, read and write
 * on the socket, and unscoped `--allow-env`.
 *
 * @module
 */

import Docker from "dockerode";
import type { Readable, Writable } from "node:stream";
import { DockerApiError, EngineUnreachableError, SHORT_CALL_MS } from "../docker/docker_api.ts";

/** What a launch needs of an image's config. */
export interface ImageConfig {
  readonly id: string;
  /** `Config.User`: `""` means root. */
  readonly user: string;
  readonly env: readonly string[];
  readonly labels: Readonly<Record<string, string>>;
}

/** A container's stdio as attached before start. */
export interface Attached {
  /** The multiplexed stdout/stderr stream. */
  readonly output: Readable;
  /** The container's stdin (end it to close stdin), or `null` when it has none. */
  readonly input: Writable | null;
}

interface ContainerLike {
  attach(opts: Record<string, unknown>): Promise<Readable & Writable>;
  kill(opts: Record<string, unknown>): Promise<unknown>;
  inspect(opts: Record<string, unknown>): Promise<Record<string, unknown>>;
}

interface DockerodeLike {
  getImage(
    name: string,
  ): { inspect(opts: Record<string, unknown>): Promise<Record<string, unknown>> };
  createContainer(body: Record<string, unknown>): Promise<{ id: string }>;
  getContainer(id: string): ContainerLike;
}

const UNREACHABLE_CODES = new Set([
  "ENOENT",
  "ECONNREFUSED",
  "ECONNRESET",
  "EACCES",
  "EPERM",
  "ENOTSOCK",
  "EPIPE",
  "ETIMEDOUT",
]);

function asRecord(x: unknown): Record<string, unknown> {
  return typeof x === "object" && x !== null ? x as Record<string, unknown> : {};
}

/** The HTTP status an engine failure carried, if any. */
export function statusOf(error: unknown): number | undefined {
  if (error instanceof DockerApiError) return error.statusCode;
  const s = asRecord(error).statusCode;
  return typeof s === "number" ? s : undefined;
}

/**
 * Image configs by engine socket and image id, so a worker inspects a Kit's
 * image once, not at every launch. An id is the digest of its config, so what
 * it names never changes; an image removed since shows up at the container's
 * create (404), and {@linkcode KitDocker.forgetImage} drops it.
 */
const IMAGES = new Map<string, ImageConfig>();
/** Kits are few; past this many images the oldest is dropped. */
const IMAGES_KEPT = 64;
const IMAGE_ID = /^sha256:[0-9a-f]{64}$/;

/** The extra engine calls; holds no connection between calls. */
export class KitDocker {
  readonly socket: string;
  readonly #docker: DockerodeLike;

  constructor(socket: string) {
    this.socket = socket;
    this.#docker = new Docker({ socketPath: socket }) as unknown as DockerodeLike;
  }

  /** Same mapping as `DockerApi`: no answer, or an answer that is a failure. */
  #fail(error: unknown, what: string): never {
    if (error instanceof Deno.errors.NotCapable) throw error;
    const e = asRecord(error);
    const code = typeof e.code === "string" ? e.code : undefined;
    if (code && UNREACHABLE_CODES.has(code)) {
      throw new EngineUnreachableError(this.socket, code, { cause: error });
    }
    if (e.name === "AbortError" || e.name === "TimeoutError" || code === "ABORT_ERR") {
      throw new EngineUnreachableError(
        this.socket,
        `no answer to ${what} within ${SHORT_CALL_MS} ms`,
        { cause: error },
      );
    }
    const json = asRecord(e.json);
    const detail = typeof json.message === "string"
      ? json.message
      : error instanceof Error
      ? error.message
      : String(error);
    throw new DockerApiError(`${what}: ${detail.trim()}`, statusOf(error), { cause: error });
  }

  async #call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      this.#fail(error, what);
    }
  }

  /**
   * `GET /images/{name}/json`, the parts a launch needs; asked once per
   * image id (`sha256:…`) and engine.
   *
   * @returns null when the engine has no such image
   */
  async imageConfig(name: string): Promise<ImageConfig | null> {
    const key = `${this.socket}\n${name}`;
    const known = IMAGES.get(key);
    if (known !== undefined) return known;
    const config = await this.#inspectImage(name);
    if (config !== null && IMAGE_ID.test(name) && config.id === name) {
      if (IMAGES.size >= IMAGES_KEPT) IMAGES.delete(IMAGES.keys().next().value!);
      IMAGES.set(key, config);
    }
    return config;
  }

  /** Drops what {@linkcode imageConfig} keeps of image `name` (the engine no longer has it). */
  forgetImage(name: string): void {
    IMAGES.delete(`${this.socket}\n${name}`);
  }

  async #inspectImage(name: string): Promise<ImageConfig | null> {
    let raw: Record<string, unknown>;
    try {
      raw = await this.#docker.getImage(name).inspect({
        abortSignal: AbortSignal.timeout(SHORT_CALL_MS),
      });
    } catch (error) {
      if (statusOf(error) === 404) return null;
      this.#fail(error, `inspect image ${name}`);
    }
    const config = asRecord(raw.Config);
    const labels: Record<string, string> = {};
    for (const [k, v] of Object.entries(asRecord(config.Labels))) {
      if (typeof v === "string") labels[k] = v;
    }
    return {
      id: String(raw.Id ?? ""),
      user: typeof config.User === "string" ? config.User : "",
      env: Array.isArray(config.Env)
        ? config.Env.filter((s): s is string => typeof s === "string")
        : [],
      labels,
    };
  }

  /**
   * `POST /containers/create?name=…` with a full body (Docker's
   * `ContainerConfig` plus `HostConfig`).
   *
   * @returns the container id
   * @throws {DockerApiError} with the engine's status (400 bad config, 404 no image, 409 name taken)
   */
  async create(body: Record<string, unknown>): Promise<string> {
    const c = await this.#call(
      `create container ${String(body.name ?? "")}`.trimEnd(),
      () => this.#docker.createContainer(body),
    );
    return c.id;
  }

  /**
   * `POST /containers/{id}/attach?stream=1` for stdout and stderr, and stdin
   * when `stdin` (a hijacked connection: write the input, then end it).
   */
  async attach(id: string, stdin: boolean): Promise<Attached> {
    const stream = await this.#call(
      `attach to container ${id}`,
      () =>
        this.#docker.getContainer(id).attach({
          stream: true,
          stdout: true,
          stderr: true,
          stdin,
          hijack: stdin,
        }),
    );
    return { output: stream, input: stdin ? stream : null };
  }

  /**
   * `POST /containers/{id}/kill?signal=…`.
   *
   * @returns false when the container was not running (or is gone)
   */
  async kill(id: string, signal: "SIGINT" | "SIGTERM" | "SIGKILL"): Promise<boolean> {
    try {
      await this.#docker.getContainer(id).kill({
        signal,
        abortSignal: AbortSignal.timeout(SHORT_CALL_MS),
      });
      return true;
    } catch (error) {
      const status = statusOf(error);
      if (status === 404 || status === 409) return false;
      this.#fail(error, `kill container ${id} with ${signal}`);
    }
  }

  /**
   * `GET /containers/{id}/json`: whether the engine still knows the container.
   *
   * @throws {EngineUnreachableError} when it cannot tell
   */
  async exists(id: string): Promise<boolean> {
    try {
      await this.#docker.getContainer(id).inspect({
        abortSignal: AbortSignal.timeout(SHORT_CALL_MS),
      });
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return false;
      this.#fail(error, `inspect container ${id}`);
    }
  }
}
