import { readFileSync } from 'fs';
import { join } from 'path';
import { DEFAULT_SETTINGS } from '../../src/tokens';

const schema = JSON.parse(
  readFileSync(join(__dirname, '..', '..', 'schema', 'plugin.json'), 'utf8')
);

describe('settings schema', () => {
  it('has every setting with title, description and the default of DEFAULT_SETTINGS', () => {
    const properties = schema.properties as Record<string, any>;
    expect(Object.keys(properties).sort()).toEqual(
      Object.keys(DEFAULT_SETTINGS).sort()
    );
    for (const [key, value] of Object.entries(DEFAULT_SETTINGS)) {
      expect(properties[key].title).toBeTruthy();
      expect(properties[key].description).toBeTruthy();
      expect(properties[key].default).toEqual(value);
    }
  });

  it('toastMinMiB: 1 MiB by default, bounded', () => {
    expect(schema.properties.toastMinMiB).toMatchObject({
      type: 'number',
      default: 1,
      minimum: 0
    });
    expect(schema.properties.toastMinMiB.maximum).toBeGreaterThan(1);
  });
});
