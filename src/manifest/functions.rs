//! The pure functions manifests can call (`lower`, `join`, `format`, ...).
//!
//! hcl-rs functions are plain `fn` pointers, so they cannot see the environment or the manifest's
//! directory; `env()` and `file()` are therefore resolved before evaluation, in `eval.rs`. The
//! names and behaviour follow Terraform's functions of the same name, which is what HCL users
//! already know.

// hcl-rs fixes every function's signature as `fn(FuncArgs) -> Result<Value, String>`, so
// arguments arrive by value and infallible functions still return a `Result`.
#![allow(clippy::needless_pass_by_value, clippy::unnecessary_wraps)]

use hcl::Value;
use hcl::eval::{Context, FuncArgs, FuncDef, ParamType};

/// Names of every function a manifest can call, for "did you mean" (includes `env` and `file`).
pub(super) const NAMES: [&str; 20] = [
    "abs",
    "ceil",
    "coalesce",
    "concat",
    "contains",
    "env",
    "file",
    "floor",
    "format",
    "join",
    "keys",
    "length",
    "lower",
    "max",
    "merge",
    "min",
    "replace",
    "split",
    "trimspace",
    "upper",
];

/// Declare the pure functions in a context.
pub(super) fn declare(ctx: &mut Context<'_>) {
    let string = || ParamType::String;
    let number = || ParamType::Number;
    ctx.declare_func("lower", FuncDef::builder().param(string()).build(lower));
    ctx.declare_func("upper", FuncDef::builder().param(string()).build(upper));
    ctx.declare_func(
        "trimspace",
        FuncDef::builder().param(string()).build(trimspace),
    );
    ctx.declare_func(
        "join",
        FuncDef::builder()
            .param(string())
            .param(ParamType::array_of(string()))
            .build(join),
    );
    ctx.declare_func(
        "split",
        FuncDef::builder()
            .param(string())
            .param(string())
            .build(split),
    );
    ctx.declare_func(
        "replace",
        FuncDef::builder()
            .params([string(), string(), string()])
            .build(replace),
    );
    ctx.declare_func(
        "format",
        FuncDef::builder()
            .param(string())
            .variadic_param(ParamType::Any)
            .build(format),
    );
    ctx.declare_func(
        "min",
        FuncDef::builder().variadic_param(number()).build(min),
    );
    ctx.declare_func(
        "max",
        FuncDef::builder().variadic_param(number()).build(max),
    );
    ctx.declare_func("abs", FuncDef::builder().param(number()).build(abs));
    ctx.declare_func("ceil", FuncDef::builder().param(number()).build(ceil));
    ctx.declare_func("floor", FuncDef::builder().param(number()).build(floor));
    ctx.declare_func(
        "concat",
        FuncDef::builder()
            .variadic_param(ParamType::array_of(ParamType::Any))
            .build(concat),
    );
    ctx.declare_func(
        "length",
        FuncDef::builder().param(ParamType::Any).build(length),
    );
    ctx.declare_func(
        "contains",
        FuncDef::builder()
            .param(ParamType::array_of(ParamType::Any))
            .param(ParamType::Any)
            .build(contains),
    );
    ctx.declare_func(
        "keys",
        FuncDef::builder()
            .param(ParamType::object_of(ParamType::Any))
            .build(keys),
    );
    ctx.declare_func(
        "merge",
        FuncDef::builder()
            .variadic_param(ParamType::object_of(ParamType::Any))
            .build(merge),
    );
    ctx.declare_func(
        "coalesce",
        FuncDef::builder()
            .variadic_param(ParamType::Any)
            .build(coalesce),
    );
}

fn str_arg(args: &FuncArgs, i: usize) -> Result<&str, String> {
    args.get(i)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("argument {} must be a string", i + 1))
}

fn num(value: &Value) -> Result<f64, String> {
    value
        .as_f64()
        .ok_or_else(|| "arguments must be numbers".to_owned())
}

fn lower(args: FuncArgs) -> Result<Value, String> {
    Ok(str_arg(&args, 0)?.to_lowercase().into())
}

fn upper(args: FuncArgs) -> Result<Value, String> {
    Ok(str_arg(&args, 0)?.to_uppercase().into())
}

fn trimspace(args: FuncArgs) -> Result<Value, String> {
    Ok(str_arg(&args, 0)?.trim().into())
}

fn join(args: FuncArgs) -> Result<Value, String> {
    let sep = str_arg(&args, 0)?;
    let items = args
        .get(1)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let parts: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
    Ok(parts.join(sep).into())
}

fn split(args: FuncArgs) -> Result<Value, String> {
    let sep = str_arg(&args, 0)?;
    let text = str_arg(&args, 1)?;
    if sep.is_empty() {
        return Err("the separator must not be empty".to_owned());
    }
    Ok(text.split(sep).map(Value::from).collect())
}

fn replace(args: FuncArgs) -> Result<Value, String> {
    Ok(str_arg(&args, 0)?
        .replace(str_arg(&args, 1)?, str_arg(&args, 2)?)
        .into())
}

/// `format("%s-%d", a, b)`: `%s`, `%d` and `%v` take the next argument, `%%` is a percent sign.
fn format(args: FuncArgs) -> Result<Value, String> {
    let spec = str_arg(&args, 0)?.to_owned();
    let mut values = args.iter().skip(1);
    let mut out = String::new();
    let mut chars = spec.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some(verb @ ('s' | 'd' | 'v')) => {
                let value = values
                    .next()
                    .ok_or_else(|| format!("not enough arguments for `%{verb}`"))?;
                match (verb, value) {
                    ('d', v) if v.as_f64().is_none() => {
                        return Err("`%d` needs a number".to_owned());
                    }
                    (_, Value::String(s)) => out.push_str(s),
                    (_, other) => out.push_str(&other.to_string()),
                }
            }
            Some(other) => {
                return Err(format!(
                    "unsupported verb `%{other}` (use %s, %d, %v or %%)"
                ));
            }
            None => return Err("the format ends with a lone `%`".to_owned()),
        }
    }
    if values.next().is_some() {
        return Err("more arguments than `%` verbs".to_owned());
    }
    Ok(out.into())
}

fn number_value(x: f64) -> Value {
    // Whole numbers stay integers so that `min(4, 6)` reads as `4`, not `4.0`.
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        // The range check above makes the cast exact.
        #[allow(clippy::cast_possible_truncation)]
        Value::from(x as i64)
    } else {
        Value::from(x)
    }
}

fn fold(args: &FuncArgs, pick: fn(f64, f64) -> f64) -> Result<Value, String> {
    let mut acc: Option<f64> = None;
    for v in args.iter() {
        let x = num(v)?;
        acc = Some(acc.map_or(x, |a| pick(a, x)));
    }
    acc.map(number_value)
        .ok_or_else(|| "needs at least one number".to_owned())
}

fn min(args: FuncArgs) -> Result<Value, String> {
    fold(&args, f64::min)
}

fn max(args: FuncArgs) -> Result<Value, String> {
    fold(&args, f64::max)
}

fn abs(args: FuncArgs) -> Result<Value, String> {
    Ok(number_value(num(&args[0])?.abs()))
}

fn ceil(args: FuncArgs) -> Result<Value, String> {
    Ok(number_value(num(&args[0])?.ceil()))
}

fn floor(args: FuncArgs) -> Result<Value, String> {
    Ok(number_value(num(&args[0])?.floor()))
}

fn concat(args: FuncArgs) -> Result<Value, String> {
    Ok(args
        .iter()
        .filter_map(Value::as_array)
        .flatten()
        .cloned()
        .collect())
}

fn length(args: FuncArgs) -> Result<Value, String> {
    match &args[0] {
        Value::String(s) => Ok(s.chars().count().into()),
        Value::Array(a) => Ok(a.len().into()),
        Value::Object(o) => Ok(o.len().into()),
        _ => Err("needs a string, list or map".to_owned()),
    }
}

fn contains(args: FuncArgs) -> Result<Value, String> {
    let list = args[0].as_array().cloned().unwrap_or_default();
    Ok(list.contains(&args[1]).into())
}

fn keys(args: FuncArgs) -> Result<Value, String> {
    let map = args[0].as_object().cloned().unwrap_or_default();
    Ok(map.keys().map(|k| Value::from(k.as_str())).collect())
}

fn merge(args: FuncArgs) -> Result<Value, String> {
    let mut out = hcl::Map::new();
    for v in args.iter() {
        if let Some(map) = v.as_object() {
            for (k, v) in map {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Value::Object(out))
}

fn coalesce(args: FuncArgs) -> Result<Value, String> {
    args.iter()
        .find(|v| !v.is_null() && v.as_str() != Some(""))
        .cloned()
        .ok_or_else(|| "every argument is null or empty".to_owned())
}

#[cfg(test)]
mod tests {
    use hcl::eval::Evaluate;

    use super::*;

    fn eval(expr: &str) -> Result<Value, String> {
        let mut ctx = Context::new();
        declare(&mut ctx);
        let parsed: hcl::Expression = expr.parse().map_err(|e: hcl::Error| e.to_string())?;
        parsed.evaluate(&ctx).map_err(|e| e.to_string())
    }

    #[test]
    fn string_functions() {
        assert_eq!(eval("lower(\"AbC\")"), Ok("abc".into()));
        assert_eq!(eval("upper(\"x\")"), Ok("X".into()));
        assert_eq!(eval("join(\"-\", [\"a\", \"b\"])"), Ok("a-b".into()));
        assert_eq!(eval("format(\"%s-%d%%\", \"n\", 4)"), Ok("n-4%".into()));
        assert!(eval("format(\"%d\", \"x\")").is_err());
        assert!(eval("format(\"%s\")").is_err());
        assert_eq!(eval("replace(\"a.b\", \".\", \"-\")"), Ok("a-b".into()));
        assert_eq!(eval("length(split(\",\", \"a,b,c\"))"), Ok(3.into()));
    }

    #[test]
    fn number_and_collection_functions() {
        assert_eq!(eval("min(4, 6, 5)"), Ok(4.into()));
        assert_eq!(eval("max(4, 6.5)"), Ok(6.5.into()));
        assert_eq!(eval("length(concat([1], [2, 3]))"), Ok(3.into()));
        assert_eq!(eval("contains([\"a\"], \"a\")"), Ok(true.into()));
        assert_eq!(eval("coalesce(null, \"\", \"x\")"), Ok("x".into()));
        assert_eq!(eval("merge({a = 1}, {a = 2})"), eval("{a = 2}"));
    }
}
