"""The notebook front end's rendering: text formats, live turn rendering, the sessions panel.

- :mod:`~jupyter_agent.ui.display`: pure plain-text formatting (footer, usage, recap,
  history, the sessions table);
- :mod:`~jupyter_agent.ui.render`: Markdown for Jupyter and the live turn renderers;
- :mod:`~jupyter_agent.ui.results`: the records the controller returns and these format;
- :mod:`~jupyter_agent.ui.panel` and :mod:`~jupyter_agent.ui.panel_rows`: the ipywidgets
  sessions panel (the only modules here that import ``ipywidgets``).

Importing this package imports none of them.
"""
