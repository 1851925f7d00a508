/// The version of Horizon for Linux: what every program answers to `--version`, and the version
/// of the Debian packages `Tools/package.sh` builds (it reads the string from this file, so keep
/// it a plain literal on one line).
public enum HorizonVersion {
    public static let current = "0.9.0"
}
