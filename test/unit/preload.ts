/**
 * Jest: the findings' rules are a lazy chunk in the app (loaded with the
 * gauge's first kernel, src/analysis/findings/rules-loader.ts). Most specs
 * render the gauge's state as it is once they are there; load them before each
 * spec file. test/unit/findings-loader.spec.ts tests the state before.
 */
import { loadFindings } from '../../src/analysis/findings/rules-loader';

beforeAll(async () => {
  await loadFindings();
});
