"""The notebook front end's rendering: text formats, live turn rendering, the sessions panel.

- :mod:`~jupyter_agent.ui.display`: pure plain-text formatting (footer, usage, recap,
  history, the sessions table); :mod:`~jupyter_agent.ui.calls`: how tool calls and
  their results show;
- :mod:`~jupyter_agent.ui.markdown`: Markdown that is inert (no raw HTML, no images, no
  unsafe links) and shows TeX triggers as typed (replies, our own lines), and Markdown to
  text or HTML (summaries); :func:`~jupyter_agent.ui.display.terminal_text` makes text
  inert for a terminal;
- :mod:`~jupyter_agent.ui.render`: the live turn renderers; :mod:`~jupyter_agent.ui.status`:
  the status line of long waits; :mod:`~jupyter_agent.ui.recap`: the resume recap;
- :mod:`~jupyter_agent.ui.advice`: what each error tells the user to do next;
- :mod:`~jupyter_agent.ui.panel` and :mod:`~jupyter_agent.ui.panel_rows`: the ipywidgets
  sessions panel (the only modules here that import ``ipywidgets``).

Importing this package imports none of them.
"""
