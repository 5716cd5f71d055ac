"""Glossary: what do these pages' terms mean, in English and in the seeds' Chinese?"""
