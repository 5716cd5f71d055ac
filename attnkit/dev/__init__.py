"""Developer tools outside the library: the shipped model's training (:mod:`attnkit.dev.train`) and the
benchmarks (:mod:`attnkit.dev.bench`). Nothing in the library imports them."""
