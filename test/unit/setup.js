// jsdom has no asynchronous Clipboard API; @jupyterlab/apputils warns at import
// without one. The unit tests never use the clipboard, so an inert stand-in is enough.
if (typeof navigator !== 'undefined' && !navigator.clipboard) {
  Object.defineProperty(navigator, 'clipboard', {
    configurable: true,
    value: {
      read: async () => [],
      readText: async () => '',
      write: async () => undefined,
      writeText: async () => undefined
    }
  });
}
