#include "sim/benchmarks.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "core/error.h"

namespace strata::sim {

namespace {

constexpr double kPi = 3.14159265358979323846;

struct Ctx {
  Tracer& tr;
  const BenchmarkParams& p;
  bool perturbed = false;

  std::vector<double> random(const std::string& name, size_t n, double lo, double hi) const {
    uint64_t s = p.seed * 0x9e3779b97f4a7c15ull;
    for (char c : name) s = (s ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
    std::vector<double> v(n);
    for (double& x : v) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x = lo + (hi - lo) * (double((s >> 11) & ((1ull << 53) - 1)) / double(1ull << 53));
    }
    return v;
  }
  Array input(const std::string& name, std::vector<double> v) {
    if (name == p.perturb_array) {
      STRATA_CHECK(p.perturb_index < v.size(), "sim::build_benchmark: perturb_index ", p.perturb_index,
                   " out of range for input '", name, "' (size ", v.size(), ")");
      v[p.perturb_index] += p.perturb_delta;
      perturbed = true;
    }
    return tr.input(name, std::move(v));
  }
  Array constant(const std::string& name, std::vector<double> v) { return tr.constant(name, std::move(v)); }
};

// Log-softmax cross-entropy of logits[0..c) (a temp array) against `label`.
Active cross_entropy(const Array& logits, size_t c, size_t label) {
  Active m = logits.load(0);
  for_range("ce_max", c, [&](size_t k) { m = max(m, logits.load(k)); });
  Active se = 0.0;
  for_range("ce_sum", c, [&](size_t k) { se += exp(logits.load(k) - m); });
  return log(se) + m - logits.load(label);
}

void gravity(Ctx& cx) {
  const size_t n = cx.p.reduced ? 4 : 512, ns = cx.p.reduced ? 2 : 8, steps = cx.p.reduced ? 2 : 4;
  const double dt = 0.01, eps = 0.01;
  Array x0 = cx.input("x0", cx.random("x0", 2 * n, -1.0, 1.0));
  Array v0 = cx.input("v0", cx.random("v0", 2 * n, -0.1, 0.1));
  Array mass = cx.input("mass", cx.random("mass", ns, 0.5, 1.5));
  Array spos = cx.constant("src_pos", cx.random("src_pos", 2 * ns, -2.0, 2.0));
  Array x = cx.tr.temp("x", 2 * n * (steps + 1)), v = cx.tr.temp("v", 2 * n * (steps + 1));
  Array loss = cx.tr.output("loss", 1);
  for_range("init", 2 * n, [&](size_t k) {
    x.store(k, x0.load(k));
    v.store(k, v0.load(k));
  });
  for_range("step", steps, [&](size_t t) {
    for_range("particle", n, [&](size_t i) {
      const size_t at = (t * n + i) * 2, nx = ((t + 1) * n + i) * 2;
      Active px = x.load(at), py = x.load(at + 1), vx = v.load(at), vy = v.load(at + 1);
      Active ax = 0.0, ay = 0.0;
      for_range("source", ns, [&](size_t s) {
        Active dx = spos.load(2 * s) - px, dy = spos.load(2 * s + 1) - py;
        Active r2 = dx * dx + dy * dy + eps;
        Active inv = mass.load(s) / (r2 * sqrt(r2));
        ax += dx * inv;
        ay += dy * inv;
      });
      vx = vx + dt * ax;
      vy = vy + dt * ay;
      x.store(nx, px + dt * vx);
      x.store(nx + 1, py + dt * vy);
      v.store(nx, vx);
      v.store(nx + 1, vy);
    });
  });
  Active l = 0.0;
  for_range("loss", n, [&](size_t i) {
    const size_t at = (steps * n + i) * 2;
    Active dx = x.load(at) - 0.5, dy = x.load(at + 1);
    l += dx * dx + dy * dy;
  });
  loss.store(0, l / double(n));
}

void nn(Ctx& cx) {
  const size_t d = cx.p.reduced ? 12 : 784, h = cx.p.reduced ? 4 : 16, c = cx.p.reduced ? 3 : 10;
  Array img = cx.constant("img", cx.random("img", d, 0.0, 1.0));
  Array w1 = cx.input("w1", cx.random("w1", h * d, -0.1, 0.1));
  Array b1 = cx.input("b1", cx.random("b1", h, -0.1, 0.1));
  Array w2 = cx.input("w2", cx.random("w2", c * h, -0.5, 0.5));
  Array b2 = cx.input("b2", cx.random("b2", c, -0.1, 0.1));
  Array hid = cx.tr.temp("hidden", h), logits = cx.tr.temp("logits", c);
  Array loss = cx.tr.output("loss", 1);
  for_range("hidden", h, [&](size_t j) {
    Active s = b1.load(j);
    for_range("pixel", d, [&](size_t k) { s += w1.load(j * d + k) * img.load(k); });
    hid.store(j, tanh(s));
  });
  for_range("class", c, [&](size_t o) {
    Active s = b2.load(o);
    for_range("unit", h, [&](size_t j) { s += w2.load(o * h + j) * hid.load(j); });
    logits.store(o, s);
  });
  loss.store(0, cross_entropy(logits, c, 3 % c));
}

void logsum(Ctx& cx) {
  const size_t n = cx.p.reduced ? 16 : 10000;
  Array x = cx.input("x", cx.random("x", n, -2.0, 2.0));
  Array loss = cx.tr.output("loss", 1);
  Active m = x.load(0);
  for_range("max", n, [&](size_t i) { m = max(m, x.load(i)); });
  Active s = 0.0;
  for_range("sum", n, [&](size_t i) { s += exp(x.load(i) - m); });
  loss.store(0, m + log(s));
}

void matdescent(Ctx& cx) {
  const size_t m = cx.p.reduced ? 5 : 400, n = cx.p.reduced ? 4 : 400;
  const double scale = 1.0 / std::sqrt(double(n));
  Array a = cx.input("A", cx.random("A", m * n, -scale, scale));
  Array x = cx.input("x", cx.random("x", n, -1.0, 1.0));
  Array b = cx.constant("b", cx.random("b", m, -1.0, 1.0));
  Array loss = cx.tr.output("loss", 1);
  Active l = 0.0;
  for_range("row", m, [&](size_t i) {
    Active r = 0.0 - b.load(i);
    for_range("col", n, [&](size_t j) { r += a.load(i * n + j) * x.load(j); });
    l += 0.5 * r * r;
  });
  loss.store(0, l);
}

void mttkrp(Ctx& cx) {
  const size_t ni = cx.p.reduced ? 3 : 8, nj = ni, nk = ni, nr = cx.p.reduced ? 2 : 8;
  Array b = cx.constant("B", cx.random("B", ni * nj * nk, -1.0, 1.0));
  Array c = cx.input("C", cx.random("C", nj * nr, -1.0, 1.0));
  Array d = cx.input("D", cx.random("D", nk * nr, -1.0, 1.0));
  Array a = cx.tr.temp("A", ni * nr);
  Array loss = cx.tr.output("loss", 1);
  for_range("i", ni, [&](size_t i) {
    for_range("j", nj, [&](size_t j) {
      for_range("k", nk, [&](size_t k) {
        Active bijk = b.load((i * nj + j) * nk + k);
        for_range("r", nr, [&](size_t r) {
          a.store(i * nr + r, a.load(i * nr + r) + bijk * c.load(j * nr + r) * d.load(k * nr + r));
        });
      });
    });
  });
  Active l = 0.0;
  for_range("loss", ni * nr, [&](size_t k) {
    Active v = a.load(k);
    l += 0.5 * v * v;
  });
  loss.store(0, l);
}

void somier(Ctx& cx) {
  const size_t n = cx.p.reduced ? 4 : 8, steps = 2, nodes = n * n * n;
  const double ks = 10.0, rest = 1.0, dt = 0.01, inv_mass = 1.0;
  std::vector<double> x0 = cx.random("x", 3 * nodes, -0.1, 0.1);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      for (size_t k = 0; k < n; ++k) {
        const size_t at = 3 * ((i * n + j) * n + k);
        x0[at] += double(i);
        x0[at + 1] += double(j);
        x0[at + 2] += double(k);
      }
  Array x = cx.input("x", x0);
  Array v = cx.input("v", cx.random("v", 3 * nodes, -0.1, 0.1));
  Array f = cx.tr.temp("f", 3 * nodes);
  Array loss = cx.tr.output("loss", 1);
  std::vector<size_t> interior;
  for (size_t i = 1; i + 1 < n; ++i)
    for (size_t j = 1; j + 1 < n; ++j)
      for (size_t k = 1; k + 1 < n; ++k) interior.push_back((i * n + j) * n + k);
  const long nb[6] = {1, -1, long(n), -long(n), long(n * n), -long(n * n)};
  for_range("step", steps, [&](size_t) {
    for_range("force", interior.size(), [&](size_t q) {
      const size_t me = interior[q];
      Active xm[3] = {x.load(3 * me), x.load(3 * me + 1), x.load(3 * me + 2)};
      Active fs[3] = {0.0, 0.0, 0.0};
      for (long o : nb) {
        const size_t other = size_t(long(me) + o);
        Active dd[3];
        for (int c = 0; c < 3; ++c) dd[c] = x.load(3 * other + c) - xm[c];
        Active len = sqrt(dd[0] * dd[0] + dd[1] * dd[1] + dd[2] * dd[2]);
        Active mag = ks * (len - rest) / len;
        for (int c = 0; c < 3; ++c) fs[c] += mag * dd[c];
      }
      for (int c = 0; c < 3; ++c) f.store(3 * me + c, fs[c]);
    });
    for_range("update", interior.size(), [&](size_t q) {
      const size_t me = interior[q];
      for (int c = 0; c < 3; ++c) {
        Active vn = v.load(3 * me + c) + dt * inv_mass * f.load(3 * me + c);
        v.store(3 * me + c, vn);
        x.store(3 * me + c, x.load(3 * me + c) + dt * vn);
      }
    });
  });
  Active l = 0.0;
  for_range("loss", 3 * nodes, [&](size_t k) {
    Active a = x.load(k), b = v.load(k);
    l += 0.5 * (a * a + b * b);
  });
  loss.store(0, l);
}

void lenet(Ctx& cx) {
  const bool r = cx.p.reduced;
  const size_t hin = r ? 12 : 32, k = r ? 3 : 5, c1 = r ? 2 : 6, c2 = r ? 3 : 16;
  const size_t f1 = r ? 5 : 120, f2 = r ? 4 : 84, cls = r ? 3 : 10;
  const size_t o1 = hin - k + 1, p1 = o1 / 2, o2 = p1 - k + 1, p2 = o2 / 2, flat = c2 * p2 * p2;
  Array img = cx.constant("img", cx.random("img", hin * hin, 0.0, 1.0));
  auto param = [&](const std::string& name, size_t n, size_t fan_in) {
    const double s = 1.0 / std::sqrt(double(fan_in));
    return cx.input(name, cx.random(name, n, -s, s));
  };
  Array wc1 = param("conv1_w", c1 * k * k, k * k), bc1 = param("conv1_b", c1, k * k);
  Array wc2 = param("conv2_w", c2 * c1 * k * k, c1 * k * k), bc2 = param("conv2_b", c2, c1 * k * k);
  Array wf1 = param("fc1_w", f1 * flat, flat), bf1 = param("fc1_b", f1, flat);
  Array wf2 = param("fc2_w", f2 * f1, f1), bf2 = param("fc2_b", f2, f1);
  Array wf3 = param("fc3_w", cls * f2, f2), bf3 = param("fc3_b", cls, f2);
  Array a1 = cx.tr.temp("act1", c1 * o1 * o1), q1 = cx.tr.temp("pool1", c1 * p1 * p1);
  Array a2 = cx.tr.temp("act2", c2 * o2 * o2), q2 = cx.tr.temp("pool2", flat);
  Array h1 = cx.tr.temp("fc1", f1), h2 = cx.tr.temp("fc2", f2), logits = cx.tr.temp("logits", cls);
  Array loss = cx.tr.output("loss", 1);

  auto conv = [&](const std::string& name, const Array& in, size_t cin, size_t h, const Array& w, const Array& b,
                  size_t cout, const Array& out) {
    const size_t ho = h - k + 1;
    for_range(name, cout * ho * ho, [&](size_t idx) {
      const size_t o = idx / (ho * ho), y = (idx / ho) % ho, xx = idx % ho;
      Active s = b.load(o);
      for_range(name + "_in", cin, [&](size_t ci) {
        for (size_t ky = 0; ky < k; ++ky)
          for (size_t kx = 0; kx < k; ++kx)
            s += w.load(((o * cin + ci) * k + ky) * k + kx) * in.load((ci * h + y + ky) * h + xx + kx);
      });
      out.store(idx, tanh(s));
    });
  };
  auto pool = [&](const std::string& name, const Array& in, size_t c, size_t h, const Array& out) {
    const size_t ho = h / 2;
    for_range(name, c * ho * ho, [&](size_t idx) {
      const size_t ch = idx / (ho * ho), y = 2 * ((idx / ho) % ho), xx = 2 * (idx % ho);
      const size_t at = (ch * h + y) * h + xx;
      out.store(idx, 0.25 * (in.load(at) + in.load(at + 1) + in.load(at + h) + in.load(at + h + 1)));
    });
  };
  auto dense = [&](const std::string& name, const Array& in, size_t nin, const Array& w, const Array& b, size_t nout,
                   const Array& out, bool act) {
    for_range(name, nout, [&](size_t o) {
      Active s = b.load(o);
      for_range(name + "_in", nin, [&](size_t i) { s += w.load(o * nin + i) * in.load(i); });
      out.store(o, act ? tanh(s) : s);
    });
  };
  conv("conv1", img, 1, hin, wc1, bc1, c1, a1);
  pool("pool1", a1, c1, o1, q1);
  conv("conv2", q1, c1, p1, wc2, bc2, c2, a2);
  pool("pool2", a2, c2, o2, q2);
  dense("fc1", q2, flat, wf1, bf1, f1, h1, true);
  dense("fc2", h1, f1, wf2, bf2, f2, h2, true);
  dense("fc3", h2, f2, wf3, bf3, cls, logits, false);
  loss.store(0, cross_entropy(logits, cls, 7 % cls));
}

void pathfinder(Ctx& cx) {
  const size_t rows = cx.p.reduced ? 5 : 128, cols = cx.p.reduced ? 8 : 256;
  const size_t u = cx.p.unroll;
  Array wall = cx.input("wall", cx.random("wall", rows * cols, 0.0, 10.0));
  Array buf = cx.tr.temp("rows", 2 * cols);
  Array loss = cx.tr.output("loss", 1);
  for_range("init", cols, [&](size_t c) { buf.store(c, wall.load(c)); });
  for_range("row", rows - 1, [&](size_t r0) {
    const size_t r = r0 + 1, src = ((r - 1) % 2) * cols, dst = (r % 2) * cols;
    Loop col("col");
    for (size_t c = 0; c < cols; ++c) {
      if (c % u == 0) col.next();
      Active left = buf.load(src + (c == 0 ? 0 : c - 1));
      Active up = buf.load(src + c);
      Active right = buf.load(src + std::min(c + 1, cols - 1));
      buf.store(dst + c, wall.load(r * cols + c) + min(min(left, up), right));
    }
  });
  Active l = 0.0;
  const size_t last = ((rows - 1) % 2) * cols;
  for_range("sum", cols, [&](size_t c) { l += buf.load(last + c); });
  loss.store(0, l);
}

void mass_spring(Ctx& cx) {
  const bool red = cx.p.reduced;
  const size_t n = red ? 6 : 128, h = red ? 3 : 32, steps = 2, nsin = 4;
  const size_t ni = nsin + 4 * n;
  const double dt = 0.004, ks = 30.0, damping = 0.98, gravity = -4.8, strength = 0.2;
  std::vector<std::pair<size_t, size_t>> springs;
  for (size_t i = 0; i + 1 < n; ++i) springs.emplace_back(i, i + 1);
  for (size_t i = 0; i + 2 < n; ++i) springs.emplace_back(i, i + 2);
  const size_t ns = springs.size();
  std::vector<double> x0 = cx.random("x0", 2 * n, -0.01, 0.01);
  for (size_t i = 0; i < n; ++i) {
    x0[2 * i] += 0.1 * double(i);
    x0[2 * i + 1] += 0.1 + 0.05 * double(i % 2);
  }
  std::vector<double> rest(ns);
  for (size_t s = 0; s < ns; ++s) {
    const auto [a, b] = springs[s];
    rest[s] = std::hypot(x0[2 * b] - x0[2 * a], x0[2 * b + 1] - x0[2 * a + 1]);
  }
  Array xinit = cx.constant("x0", x0);
  Array w1 = cx.input("w1", cx.random("w1", h * ni, -0.3, 0.3));
  Array b1 = cx.input("b1", cx.random("b1", h, -0.1, 0.1));
  Array w2 = cx.input("w2", cx.random("w2", ns * h, -0.3, 0.3));
  Array b2 = cx.input("b2", cx.random("b2", ns, -0.1, 0.1));
  Array x = cx.tr.temp("x", 2 * n * (steps + 1)), v = cx.tr.temp("v", 2 * n * (steps + 1));
  Array in = cx.tr.temp("ctrl_in", ni * steps), hid = cx.tr.temp("hidden", h * steps);
  Array act = cx.tr.temp("act", ns * steps), f = cx.tr.temp("f", 2 * n * steps);
  Array loss = cx.tr.output("loss", 1);
  for_range("init", 2 * n, [&](size_t k) {
    x.store(k, xinit.load(k));
    v.store(k, 0.0);
  });
  for_range("step", steps, [&](size_t t) {
    const size_t xs = 2 * n * t, xn = 2 * n * (t + 1);
    Active cxs = 0.0, cys = 0.0;
    for_range("center", n, [&](size_t i) {
      cxs += x.load(xs + 2 * i);
      cys += x.load(xs + 2 * i + 1);
    });
    cxs = cxs / double(n);
    cys = cys / double(n);
    for (size_t k = 0; k < nsin; ++k)
      in.store(ni * t + k, std::sin(10.0 * dt * double(t) + 2 * kPi * double(k) / double(nsin)));
    for_range("inputs", n, [&](size_t i) {
      const size_t at = ni * t + nsin + 4 * i;
      in.store(at, x.load(xs + 2 * i) - cxs);
      in.store(at + 1, x.load(xs + 2 * i + 1) - cys);
      in.store(at + 2, v.load(xs + 2 * i));
      in.store(at + 3, v.load(xs + 2 * i + 1));
    });
    for_range("hidden", h, [&](size_t j) {
      Active s = b1.load(j);
      for_range("hidden_in", ni, [&](size_t k) { s += w1.load(j * ni + k) * in.load(ni * t + k); });
      hid.store(h * t + j, tanh(s));
    });
    for_range("actuation", ns, [&](size_t s) {
      Active a = b2.load(s);
      for_range("actuation_in", h, [&](size_t j) { a += w2.load(s * h + j) * hid.load(h * t + j); });
      act.store(ns * t + s, tanh(a));
    });
    const size_t fs = 2 * n * t;
    for_range("spring", ns, [&](size_t s) {
      const auto [a, b] = springs[s];
      Active dx = x.load(xs + 2 * b) - x.load(xs + 2 * a);
      Active dy = x.load(xs + 2 * b + 1) - x.load(xs + 2 * a + 1);
      Active len = sqrt(dx * dx + dy * dy);
      Active target = rest[s] * (1.0 + strength * act.load(ns * t + s));
      Active mag = ks * (len - target) / len;
      Active fx = mag * dx, fy = mag * dy;
      f.store(fs + 2 * a, f.load(fs + 2 * a) + fx);
      f.store(fs + 2 * a + 1, f.load(fs + 2 * a + 1) + fy);
      f.store(fs + 2 * b, f.load(fs + 2 * b) - fx);
      f.store(fs + 2 * b + 1, f.load(fs + 2 * b + 1) - fy);
    });
    for_range("update", n, [&](size_t i) {
      Active vx = damping * v.load(xs + 2 * i) + dt * f.load(fs + 2 * i);
      Active vy = damping * v.load(xs + 2 * i + 1) + dt * (f.load(fs + 2 * i + 1) + gravity);
      v.store(xn + 2 * i, vx);
      v.store(xn + 2 * i + 1, vy);
      x.store(xn + 2 * i, x.load(xs + 2 * i) + dt * vx);
      x.store(xn + 2 * i + 1, x.load(xs + 2 * i + 1) + dt * vy);
    });
  });
  // DiffTaichi's loss: minus the head object's x (the centre of mass would not move: spring
  // forces are internal and the model has no ground contact).
  loss.store(0, -x.load(2 * n * steps + 2 * (n - 1)));
}

const std::map<std::string, void (*)(Ctx&)>& registry() {
  static const std::map<std::string, void (*)(Ctx&)> r = {
      {"gravity", gravity},        {"nn", nn},         {"logsum", logsum}, {"matdescent", matdescent},
      {"mttkrp", mttkrp},          {"somier", somier}, {"lenet", lenet},   {"pathfinder", pathfinder},
      {"mass_spring", mass_spring}};
  return r;
}

}  // namespace

const std::vector<std::string>& benchmark_names() {
  static const std::vector<std::string> names = {"gravity", "nn",    "logsum",     "matdescent", "mttkrp",
                                                 "somier",  "lenet", "pathfinder", "mass_spring"};
  return names;
}

Program build_benchmark(const std::string& name, const BenchmarkParams& params) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const std::string& n : benchmark_names()) known += (known.empty() ? "" : ", ") + n;
    STRATA_FAIL("sim::build_benchmark: unknown benchmark '", name, "' (known: ", known, ")");
  }
  STRATA_CHECK(params.unroll >= 1, "sim::build_benchmark '", name, "': unroll factor must be at least 1, got ",
               params.unroll);
  Tracer tr(name);
  Ctx cx{tr, params};
  it->second(cx);
  STRATA_CHECK(params.perturb_array.empty() || cx.perturbed, "sim::build_benchmark '", name,
               "': no input array named '", params.perturb_array, "' to perturb");
  return tr.finish();
}

}  // namespace strata::sim
