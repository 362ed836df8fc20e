"""Jupyter Notebook 7 server for the Galata test of notebook7.spec.ts: the JupyterLab test
server's settings, and the Notebook 7 app exposed to Galata (``window.jupyterapp``)."""

load_subconfig("jupyter_server_test_config.py")

c.JupyterNotebookApp.expose_app_in_browser = True
