#!/usr/bin/env python3
"""Fits the fixed polynomials of src/core/activations.h and prints them.

The activations shared by host and device code (DESIGN.md §3) are built only
from +, -, *, /, fma and fixed-coefficient polynomials, so both sides produce
the same bits. This script produces those coefficients; their values are
pasted into the header as float32 hex-float literals. Re-running it prints the
same numbers (no randomness).

Method, per polynomial:
  * target and weight are evaluated in float64 on a dense grid (math.erf,
    math.erfc, math.exp, math.tanh: double precision, far below float32 ulp);
  * the weight turns the polynomial's error into the relative error of the
    activation it feeds, so the fit minimises what the header's user sees;
  * Lawson's iteratively reweighted least squares approaches the weighted
    minimax (equioscillating) polynomial; the monomial columns are
    normalised before each solve to keep it well conditioned;
  * coefficients are rounded to float32 from the highest degree down, and the
    lower ones are refitted after each rounding so they absorb its error;
  * finally the whole formula of the header is evaluated in emulated float32
    (fma emulated as one float64 multiply-add rounded to float32) and the max
    error is reported in float32 ulps of the exact result.

Polynomials (x is the activation's input, all intervals closed):
  exp        exp(r) = 1 + (r + r^2 * Q(r)),  r in [-ln2/2, ln2/2] (+ margin)
  erf small  erf(x) = x + x * P(x^2),        |x| in [0, 1]
  erf mid    erf(x) = 1 - exp(fma(-x, x, R(x - 2.5))),  |x| in [1, ERF_ONE]
             beyond ERF_ONE erf(x) rounds to ±1 in float32
  tanh small tanh(x) = x + x^3 * T(x^2),     |x| in [0, TANH_POLY_LIMIT]
             beyond it tanh(x) = 1 - 2 / (exp(2|x|) + 1) (no fit needed)
  exp_minus_one  exp(r) - 1 = r * P(r), P(0) = 1, r as for exp (sigmoid and
             swish keep e^r - 1 apart from the 1 to scale it exactly)
  sigmoid_start  y0(e) ~ 1 / (1 + e), e in [0, 1], minimax relative error:
             the start of sigmoid's division-free reciprocal (one Newton
             step and one corrected quotient follow, so ~1% is enough)

Degrees (DEGREES below): the lowest whose approximation error is a few
hundredths of an ulp, so that float32 evaluation dominates; --search prints
the table they were chosen from.

Usage: .venv/bin/python tools/fit_activation_polynomials.py [--search]
  (any Python with numpy)
  --search   also prints the error of each polynomial for a range of degrees.
"""

import argparse
import math

import numpy as np

LN2 = math.log(2.0)
ERF_MID_CENTER = 2.5
TANH_POLY_LIMIT = 0.625


def f32(value):
    return np.asarray(value, dtype=np.float64).astype(np.float32)


def fma32(a, b, c):
    # a*b is exact in float64 (24+24 bits); the one float64 rounding of the
    # sum before the float32 rounding is a (rare) double rounding, which only
    # affects this error estimate, not the header.
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def ulp32(value):
    """Spacing of float32 numbers at |value| (normal range)."""
    value = np.abs(np.asarray(value, dtype=np.float64))
    exponent = np.floor(np.log2(np.maximum(value, 2.0**-126)))
    return 2.0 ** (exponent - 23)


def horner32(coefficients, t):
    """Evaluates sum c_k t^k in float32 with fma, highest degree first."""
    acc = np.full_like(t, np.float32(coefficients[-1]))
    for c in reversed(coefficients[:-1]):
        acc = fma32(acc, t, np.full_like(t, np.float32(c)))
    return acc


def weighted_minimax(t, target, weight, degree, fixed=None, iterations=40):
    """Monomial coefficients c_0..c_degree minimising max |weight * (p(t) - target)|.

    `fixed` maps degree -> value for coefficients already rounded to float32;
    the remaining ones are fitted to the residual.
    """
    fixed = fixed or {}
    residual = target.copy()
    for k, value in fixed.items():
        residual = residual - value * t**k
    free = [k for k in range(degree + 1) if k not in fixed]
    # Basis: the free monomials, each column scaled to unit norm.
    basis = np.stack([t**k for k in free], axis=1)
    column_norm = np.linalg.norm(basis, axis=0)
    basis = basis / column_norm
    lawson = np.full(t.shape, 1.0 / t.size)
    coefficients = None
    for _ in range(iterations):
        w = weight * np.sqrt(lawson)
        solution, *_ = np.linalg.lstsq(basis * w[:, None], residual * w, rcond=None)
        coefficients = solution / column_norm
        error = np.abs(weight * (basis * column_norm @ coefficients - residual))
        lawson = lawson * error
        lawson = lawson / lawson.sum()
    full = np.zeros(degree + 1)
    for k, value in fixed.items():
        full[k] = value
    for k, value in zip(free, coefficients):
        full[k] = value
    return full


def fit_float32(t, target, weight, degree):
    """Weighted minimax fit whose coefficients are float32, rounded top-down."""
    fixed = {}
    coefficients = weighted_minimax(t, target, weight, degree)
    for k in range(degree, -1, -1):
        fixed[k] = float(np.float32(coefficients[k]))
        if k > 0:
            coefficients = weighted_minimax(t, target, weight, degree, fixed)
    return [fixed[k] for k in range(degree + 1)]


# ---- the four polynomials ----------------------------------------------------


def exp_interval():
    # n = rne(x * log2e) computed in float32 can miss the nearest integer by a
    # hair, so |r| can exceed ln2/2 slightly; fit a little beyond it.
    bound = LN2 / 2.0 * 1.002
    return np.linspace(-bound, bound, 20001)


def fit_exp(degree):
    r = exp_interval()
    r = r[r != 0.0]
    target = (np.exp(r) - 1.0 - r) / (r * r)
    weight = r * r / np.exp(r)  # error of Q -> relative error of exp(r)
    return fit_float32(r, target, weight, degree)


def model_exp(coefficients):
    r = exp_interval()
    approx = 1.0 + r + r * r * np.polynomial.polynomial.polyval(r, coefficients)
    return np.max(np.abs(approx - np.exp(r)) / ulp32(np.exp(r)))


def check_exp(coefficients):
    r = f32(exp_interval())
    r2 = r * r
    q = horner32(coefficients, r)
    approx = np.float32(1.0) + fma32(r2, q, r)
    exact = np.exp(r.astype(np.float64))
    return np.max(np.abs(approx - exact) / ulp32(exact))


def erf_small_grid():
    return np.linspace(0.0, 1.0, 20001)[1:]


def fit_erf_small(degree):
    x = erf_small_grid()
    u = x * x
    exact = np.array([math.erf(v) for v in x])
    target = exact / x - 1.0
    weight = x / exact  # error of P -> relative error of erf(x)
    return fit_float32(u, target, weight, degree)


def model_erf_small(coefficients):
    x = erf_small_grid()
    exact = np.array([math.erf(v) for v in x])
    approx = x + x * np.polynomial.polynomial.polyval(x * x, coefficients)
    return np.max(np.abs(approx - exact) / ulp32(exact))


def check_erf_small(coefficients):
    x = f32(erf_small_grid())
    u = x * x
    approx = fma32(x, horner32(coefficients, u), x)
    exact = np.array([math.erf(v) for v in x.astype(np.float64)])
    return np.max(np.abs(approx - exact) / ulp32(exact))


def erf_one_threshold():
    """Smallest float32 x beyond which erf(x) rounds to 1.0f (erfc(x) < 2^-25)."""
    lo, hi = 3.0, 5.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if math.erfc(mid) < 2.0**-25:
            hi = mid
        else:
            lo = mid
    return float(np.nextafter(np.float32(hi), np.float32(np.inf)))


def erf_mid_grid():
    return np.linspace(1.0, erf_one_threshold(), 30001)


def fit_erf_mid(degree):
    x = erf_mid_grid()
    erfc = np.array([math.erfc(v) for v in x])
    target = np.log(erfc) + x * x  # R = log(erfc(x)) + x^2, the smooth part
    weight = erfc / (1.0 - erfc)  # error of R -> relative error of erf(x)
    return fit_float32(x - ERF_MID_CENTER, target, weight, degree)


def model_erf_mid(coefficients):
    x = erf_mid_grid()
    exact = np.array([math.erf(v) for v in x])
    r = np.polynomial.polynomial.polyval(x - ERF_MID_CENTER, coefficients)
    approx = 1.0 - np.exp(r - x * x)
    return np.max(np.abs(approx - exact) / ulp32(exact))


def check_erf_mid(coefficients):
    x = f32(erf_mid_grid())
    r = horner32(coefficients, x - np.float32(ERF_MID_CENTER))
    exponent = fma32(-x, x, r)
    # exp() is checked on its own (tests/unit/test_activations.cc); here it is
    # float64's exp rounded to float32, i.e. a correctly rounded exp.
    e = f32(np.exp(exponent.astype(np.float64)))
    approx = np.float32(1.0) - e
    exact = np.array([math.erf(v) for v in x.astype(np.float64)])
    return np.max(np.abs(approx - exact) / ulp32(exact))


def tanh_small_grid():
    return np.linspace(0.0, TANH_POLY_LIMIT, 20001)[1:]


def fit_tanh_small(degree):
    x = tanh_small_grid()
    u = x * x
    exact = np.tanh(x)
    target = (exact - x) / (x * u)
    weight = x * u / exact  # error of T -> relative error of tanh(x)
    return fit_float32(u, target, weight, degree)


def model_tanh_small(coefficients):
    x = tanh_small_grid()
    approx = x + x**3 * np.polynomial.polynomial.polyval(x * x, coefficients)
    return np.max(np.abs(approx - np.tanh(x)) / ulp32(np.tanh(x)))


def check_tanh_small(coefficients):
    x = f32(tanh_small_grid())
    u = x * x
    x3 = x * u
    approx = fma32(x3, horner32(coefficients, u), x)
    exact = np.tanh(x.astype(np.float64))
    return np.max(np.abs(approx - exact) / ulp32(exact))


def fit_exp_minus_one(degree):
    # P(r) = (exp(r) - 1) / r; weight: P's error -> relative error of exp(r).
    # At the header's degree the constant term rounds to exactly 1.0.
    r = exp_interval()
    r = r[r != 0.0]
    return fit_float32(r, (np.exp(r) - 1.0) / r, r / np.exp(r), degree)


def model_exp_minus_one(coefficients):
    r = exp_interval()
    approx = 1.0 + r * np.polynomial.polynomial.polyval(r, coefficients)
    return np.max(np.abs(approx - np.exp(r)) / ulp32(np.exp(r)))


def check_exp_minus_one(coefficients):
    # As the header: t = P(r) r rounded, then e^r = 1 + t rounded once.
    r = f32(exp_interval())
    t = (horner32(coefficients, r).astype(np.float64) * r).astype(np.float32)
    approx = (1.0 + t.astype(np.float64)).astype(np.float32)
    exact = np.exp(r.astype(np.float64))
    return np.max(np.abs(approx - exact) / ulp32(exact))


def sigmoid_start_grid():
    return np.linspace(0.0, 1.0, 20001)


def fit_sigmoid_start(degree):
    e = sigmoid_start_grid()
    return fit_float32(e, 1.0 / (1.0 + e), 1.0 + e, degree)


def model_sigmoid_start(coefficients):
    # Relative error of the start (not ulps: a Newton step follows).
    e = sigmoid_start_grid()
    return np.max(np.abs(np.polynomial.polynomial.polyval(e, coefficients) * (1.0 + e) - 1.0))


def check_sigmoid_start(coefficients):
    return model_sigmoid_start(coefficients)


# ---- output ----------------------------------------------------------------------


def hex_literal(value):
    """C++ float32 hex-float literal, e.g. 0x1.62e43p-1f."""
    text = float(np.float32(value)).hex()  # exact: the value is a float32
    mantissa, exponent = text.split("p")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}p{exponent}f".replace("p+", "p")


def print_array(name, coefficients, comment):
    print(f"// {comment}")
    print(f"inline constexpr float {name}[] = {{")
    for k, c in enumerate(coefficients):
        print(f"    {hex_literal(c)},  // c{k} = {c:.9g}")
    print("};")


DEGREES = {"exp": 5, "erf_small": 6, "erf_mid": 6, "tanh_small": 5, "exp_minus_one": 5,
           "sigmoid_start": 2}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--search", action="store_true", help="report errors per degree")
    args = parser.parse_args()

    polynomials = [
        ("exp", fit_exp, model_exp, check_exp, range(3, 7)),
        ("erf_small", fit_erf_small, model_erf_small, check_erf_small, range(4, 9)),
        ("erf_mid", fit_erf_mid, model_erf_mid, check_erf_mid, range(6, 13)),
        ("tanh_small", fit_tanh_small, model_tanh_small, check_tanh_small, range(3, 8)),
        ("exp_minus_one", fit_exp_minus_one, model_exp_minus_one, check_exp_minus_one,
         range(4, 7)),
        ("sigmoid_start", fit_sigmoid_start, model_sigmoid_start, check_sigmoid_start,
         range(1, 4)),
    ]
    if args.search:
        print("max error in float32 ulps of the exact result: approximation alone "
              "(float64 arithmetic, float32 coefficients) / formula in float32")
        for name, fit, model, check, degrees in polynomials:
            for degree in degrees:
                c = fit(degree)
                print(f"{name:11s} degree {degree:2d}: {model(c):8.4f} / {check(c):.3f} ulp")
        print()

    print("// ---- generated by tools/fit_activation_polynomials.py ----")
    print("// Max errors in float32 ulps of the exact result over the interval: the")
    print("// approximation (float64 arithmetic) / the formula evaluated in float32.")
    for (name, fit, model, check, _), (array, formula) in zip(polynomials, [
        ("kExpQ", "exp(r) = 1 + (r + r^2 Q(r)), |r| <= ln2/2"),
        ("kErfSmallP", "erf(x) = x + x P(x^2), |x| <= 1"),
        ("kErfMidR", f"erf(x) = 1 - exp(fma(-x, x, R(x - {ERF_MID_CENTER}))), "
                     "1 <= |x| < kErfOneThreshold (exp exact here)"),
        ("kTanhSmallT", f"tanh(x) = x + x^3 T(x^2), |x| <= {TANH_POLY_LIMIT}"),
        ("kExpMinusOneP", "exp(r) - 1 = r P(r), |r| <= ln2/2 (P(0) = 1)"),
        ("kSigmoidStart", "1 / (1 + e), e in [0, 1] (relative error, not ulps)"),
    ]):
        c = fit(DEGREES[name])
        print_array(array, c, f"{formula}: {model(c):.4f} / {check(c):.3f} ulp")
    one = erf_one_threshold()
    print(f"inline constexpr float kErfOneThreshold = {hex_literal(one)};  // {one:.9g}")


if __name__ == "__main__":
    main()
