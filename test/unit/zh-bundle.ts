/**
 * The extension's zh_CN catalogue as JupyterLab's TranslationManager loads it
 * for zh-CN: the JSON that jupyterlab_server serves
 * (`jupyterlab_gpu_hygiene/locale/zh_CN/LC_MESSAGES/jupyterlab_gpu_hygiene.json`,
 * compiled by `make i18n`), in a `Gettext` bundle.
 */
import * as fs from 'fs';
import * as path from 'path';
import { Gettext } from '@jupyterlab/translation';
import { DOMAIN } from '../../src/i18n';

/** The catalogue's file. */
export const ZH_CATALOGUE = path.join(
  path.resolve(__dirname, '..', '..'),
  DOMAIN,
  'locale',
  'zh_CN',
  'LC_MESSAGES',
  `${DOMAIN}.json`
);

/** The catalogue's JSON (Jed format: '' holds the header). */
export function zhCatalogue(): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(ZH_CATALOGUE, 'utf8'));
}

/** A bundle that translates the extension's strings into zh-CN. */
export function zhBundle(): Gettext {
  const catalogue = zhCatalogue();
  const header = catalogue[''] as Record<string, string>;
  const gettext = new Gettext({ domain: DOMAIN, locale: 'zh-CN' });
  gettext.loadJSON(
    {
      ...catalogue,
      '': {
        domain: header.domain,
        language: header.language,
        pluralForms: header.plural_forms
      }
    } as any,
    DOMAIN
  );
  return gettext;
}
