// SVG files are imported as strings (JupyterLab's builder inlines them as source).
declare module '*.svg' {
  const value: string;
  export default value;
}
