"use strict";

// The sum of two numbers.
exports.sum = (a, b) => a + b;
