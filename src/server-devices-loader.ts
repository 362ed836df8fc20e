/**
 * Loads src/server-devices.ts (the samples composed between cells, the age
 * of what is shown) in a chunk of its own, once per page: off JupyterLab's
 * start path, like the findings' rules (`analysis/findings/rules-loader.ts`).
 */
import type * as ServerDevices from './server-devices';

/** The module, once loaded. */
export type ServerDevicesModule = typeof ServerDevices;

let loaded: ServerDevicesModule | null = null;
let loading: Promise<ServerDevicesModule> | null = null;

/** Load the module (once); rejects when its chunk cannot be loaded. */
export function loadServerDevices(): Promise<ServerDevicesModule> {
  if (!loading) {
    loading = import('./server-devices').then(module => (loaded = module));
    loading.catch(() => {
      loading = null; // asked again next time
    });
  }
  return loading;
}

/** The module if it has loaded, else null (the views then show no age). */
export function loadedServerDevices(): ServerDevicesModule | null {
  return loaded;
}
