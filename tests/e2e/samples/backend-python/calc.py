"""A tiny module for the backend profile's sample project."""


def mean(values):
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)
