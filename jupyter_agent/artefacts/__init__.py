"""Sessions as artefacts: forks, exports (ipynb, md, json), search and redaction."""
