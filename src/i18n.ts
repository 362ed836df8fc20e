/**
 * Translation of the extension's settings schema (schema/plugin.json).
 *
 * jupyterlab_server translates a schema's titles and descriptions only from a
 * language pack's .mo files (`TranslationBundle.update_locale` looks in the
 * `jupyterlab_language_pack_<locale>` package, nowhere else), so the catalogue
 * this package ships (`jupyterlab.locale` entry point, served to the browser as
 * JSON) never reaches the settings handler. The same strings, with the same
 * contexts, are in that catalogue; the setting registry's `fetch` transform
 * (the schema says `jupyter.lab.transform`) applies them in the browser.
 */
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import type { TranslationBundle } from '@jupyterlab/translation';

/** Translation domain of the extension (its Python package's name). */
export const DOMAIN = 'jupyterlab_gpu_hygiene';

/**
 * Paths (JSON-pointer-like, `[i]` for array items) of the schema strings that
 * are translated, and their gettext contexts: jupyterlab_server's
 * DEFAULT_SCHEMA_SELECTORS, which jupyterlab-translate extracts too.
 */
export const SCHEMA_SELECTORS: ReadonlyArray<[RegExp, string]> = [
  [/^\/properties\/.*\/title$/, 'settings'],
  [/^\/properties\/.*\/description$/, 'settings'],
  [/^\/definitions\/.*\/properties\/.*\/title$/, 'settings'],
  [/^\/definitions\/.*\/properties\/.*\/description$/, 'settings'],
  [/^\/title$/, 'schema'],
  [/^\/description$/, 'schema'],
  [/^\/jupyter\.lab\.setting-icon-label$/, 'settings'],
  [/^\/jupyter\.lab\.menus\/.*\/label$/, 'menu'],
  [/^\/jupyter\.lab\.toolbars\/.*\/label$/, 'toolbar']
];

/** The context a schema string at `path` is translated in; null: not translated. */
export function schemaContext(path: string): string | null {
  const hit = SCHEMA_SELECTORS.find(([pattern]) => pattern.test(path));
  return hit ? hit[1] : null;
}

/** A copy of `value` (a schema or part of one at `prefix`) with its selected strings translated. */
function translated(
  value: unknown,
  prefix: string,
  bundle: TranslationBundle
): unknown {
  if (Array.isArray(value)) {
    return value.map((item, i) =>
      item && typeof item === 'object'
        ? translated(item, `${prefix}[${i}]`, bundle)
        : item
    );
  }
  if (!value || typeof value !== 'object') {
    return value;
  }
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    const path = `${prefix}/${key}`;
    const context = typeof child === 'string' ? schemaContext(path) : null;
    // The schema's own strings, extracted from schema/ by make i18n (not from a call).
    out[key] =
      context !== null
        ? bundle._p(context, child as string)
        : translated(child, path, bundle);
  }
  return out;
}

/** The schema with its titles and descriptions in the bundle's language. */
export function translateSchema(
  schema: ISettingRegistry.ISchema,
  trans: TranslationBundle
): ISettingRegistry.ISchema {
  return translated(schema, '', trans) as ISettingRegistry.ISchema;
}

/**
 * Register the `fetch` transform that translates the plugin's schema; call it
 * before the first `registry.load(pluginId)`.
 */
export function translateSettings(
  registry: ISettingRegistry,
  pluginId: string,
  trans: TranslationBundle
): void {
  registry.transform(pluginId, {
    fetch: plugin => ({
      ...plugin,
      schema: translateSchema(plugin.schema, trans)
    })
  });
}

/** For tests: the schema's strings that are translated, with their paths and contexts. */
export function schemaStrings(
  schema: unknown
): { path: string; context: string; text: string }[] {
  const out: { path: string; context: string; text: string }[] = [];
  const walk = (value: unknown, prefix: string): void => {
    if (Array.isArray(value)) {
      value.forEach((item, i) => walk(item, `${prefix}[${i}]`));
    } else if (value && typeof value === 'object') {
      for (const [key, child] of Object.entries(value)) {
        const path = `${prefix}/${key}`;
        const context = typeof child === 'string' ? schemaContext(path) : null;
        if (context !== null) {
          out.push({ path, context, text: child as string });
        } else {
          walk(child, path);
        }
      }
    }
  };
  walk(schema, '');
  return out;
}
