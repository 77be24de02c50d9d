"""The project's settings package, as ``django-admin startproject`` lays it out."""
