"""Rendering for the notebook and terminal front end; every text it shows is data."""
